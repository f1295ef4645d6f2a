#include "workloads/cuda/linear.h"

#include <cmath>

#include "workloads/cpu/tensor.h"
#include "workloads/cuda/gemm.h"
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
  // The CPU's draw order: W [in, out] row-major, then b.
  cpu::Rng rng(seed);
  const double a = 1.0 / std::sqrt(static_cast<double>(in));
  std::vector<float> w_in_out(static_cast<std::size_t>(in * out)), w(w_in_out.size());
  for (float& v : w_in_out) v = static_cast<float>(rng.uniform(-a, a));
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t o = 0; o < out; ++o)
      w[static_cast<std::size_t>(o * in + i)] = w_in_out[static_cast<std::size_t>(i * out + o)];
  weight = make_param(params, "weight", {out, in}, dtype);
  upload(weight.value, w);
  if (has_bias_) {
    std::vector<float> b(static_cast<std::size_t>(out));
    for (float& v : b) v = static_cast<float>(rng.uniform(-a, a));
    bias = make_param(params, "bias", {out}, dtype);
    upload(bias.value, b);
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
