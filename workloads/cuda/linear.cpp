#include "workloads/cuda/linear.h"

#include <cmath>

#include "workloads/counter_rng.h"
#include "workloads/cuda/gemm.h"
#include "workloads/cuda/init_fill.h"
#include "workloads/cuda/reduce.h"

namespace ppbench::cuda {

namespace {
enum Slot { kX, kDY, kSlots };
}

Linear::Linear(DeviceArena& params, std::int64_t in, std::int64_t out, bool with_bias, DType dtype,
               std::uint64_t seed)
    : in_(in), out_(out), has_bias_(with_bias), dtype_(dtype) {
  require(in > 0 && out > 0, "linear: sizes must be positive");
  require(dtype != DType::kI32, "linear: dtype must be bf16 or f32");
  // The CPU's values (workloads/cpu/linear.cpp), drawn here: W is held [out, in], the CPU's
  // [in, out] transposed, as cuBLAS reads it.
  const double a = 1.0 / std::sqrt(static_cast<double>(in));
  weight = make_param(params, "weight", {out, in}, dtype);
  weight.transposed = true;
  fill_param(weight, param_key(seed, 0), a);
  if (has_bias_) {
    bias = make_param(params, "bias", {out}, dtype);
    fill_param(bias, param_key(seed, 1), a);
  }
}

DTensor Linear::forward(Context& ctx, const DTensor& x, Saved& saved) {
  require(x.cols() == in_,
          "linear: input features " + std::to_string(x.cols()) + " != " + std::to_string(in_));
  require(x.dtype() == dtype_,
          "linear: input is " + dtype_name(x.dtype()) + ", layer is " + dtype_name(dtype_));
  Shape shape = x.shape();
  shape.back() = out_;
  DTensor y(ctx.arena, shape, dtype_, "linear output");
  if (x.rows() > 0) {
    gemm(ctx, x.rows(), out_, in_, x.data(), false, weight.value.data(), true, dtype_, y.data(),
         dtype_, 1.0f, 0.0f, has_bias_ ? bias.value.data() : nullptr);
  }
  saved.clear();
  saved.in_shape = x.shape();
  saved.t.resize(kSlots);
  saved.t[kX] = x;
  return y;
}

const DTensor& Linear::saved_input(const Saved& saved) {
  require(saved.t.size() == kSlots, "linear: nothing saved (forward not run, or W already ran)");
  return saved.t[kX];
}

DTensor Linear::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  require(dy.cols() == out_ && dy.rows() == saved.t[kX].rows() && dy.dtype() == dtype_,
          "linear: bad output gradient " + shape_text(dy.shape()));
  DTensor dx(ctx.arena, saved.in_shape, dtype_, "linear input gradient");
  if (dy.rows() > 0) {
    gemm(ctx, dy.rows(), in_, out_, dy.data(), false, weight.value.data(), false, dtype_, dx.data(),
         dtype_);
  }
  saved.t[kDY] = dy;
  return dx;
}

void Linear::backward_weight(Context& ctx, Saved& saved) {
  const DTensor& x = saved.t[kX];
  const DTensor& dy = saved.t[kDY];
  if (x.rows() > 0) {
    // dW[out, in] += dY^T X: bf16 inputs, f32 accumulation straight into the f32 gradient.
    gemm(ctx, out_, in_, x.rows(), dy.data(), true, x.data(), false, dtype_, weight.grad.data(),
         DType::kF32, 1.0f, 1.0f);
    if (has_bias_) col_sum_accumulate(ctx, dy, bias.grad.as<float>());
  }
  saved.clear();
}

std::vector<Param*> Linear::params() {
  if (has_bias_) return {&weight, &bias};
  return {&weight};
}

}  // namespace ppbench::cuda
