#include "workloads/counter_rng.h"
#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/swiglu.h"

namespace ppbench::cuda {

namespace {

enum Slot { kGateUp, kSlots };
enum Sub { kGateUpLinear, kDown, kSubs };

__device__ __forceinline__ float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }

// One thread per (row, j): gate at column j, up at column ffn + j of the fused projection.
template <typename T>
__global__ void swiglu_forward_kernel(const T* __restrict__ gu, T* __restrict__ a, std::int64_t n,
                                      std::int64_t ffn) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = k / ffn, j = k % ffn;
    const float g = to_f(gu[r * 2 * ffn + j]), u = to_f(gu[r * 2 * ffn + ffn + j]);
    a[k] = from_f<T>(g * sigmoidf(g) * u);
  }
}

template <typename T>
__global__ void swiglu_backward_kernel(const T* __restrict__ gu, const T* __restrict__ da,
                                       T* __restrict__ dgu, std::int64_t n, std::int64_t ffn) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = k / ffn, j = k % ffn;
    const float g = to_f(gu[r * 2 * ffn + j]), u = to_f(gu[r * 2 * ffn + ffn + j]);
    const float s = sigmoidf(g), d = to_f(da[k]);
    dgu[r * 2 * ffn + j] = from_f<T>(d * u * s * (1.0f + g * (1.0f - s)));  // d silu / dg
    dgu[r * 2 * ffn + ffn + j] = from_f<T>(d * g * s);
  }
}

}  // namespace

SwiGLU::SwiGLU(DeviceArena& params, std::int64_t hidden, std::int64_t ffn, DType dtype,
               std::uint64_t seed)
    : ffn_(ffn) {
  gate_up_ = std::make_unique<Linear>(params, hidden, 2 * ffn, false, dtype, derive_seed(seed, 0));
  down_ = std::make_unique<Linear>(params, ffn, hidden, false, dtype, derive_seed(seed, 1));
  gate_up_->weight.name = "w_gate_up";
  down_->weight.name = "w_down";
}

DTensor SwiGLU::forward(Context& ctx, const DTensor& x, Saved& saved) {
  saved.clear();
  saved.in_shape = x.shape();
  saved.sub.resize(kSubs);
  saved.t.resize(kSlots);
  DTensor gu = gate_up_->forward(ctx, x, saved.sub[kGateUpLinear]);
  Shape shape = x.shape();
  shape.back() = ffn_;
  DTensor a(ctx.arena, shape, x.dtype(), "swiglu activation");
  const std::int64_t n = a.numel();
  if (n > 0) {
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      swiglu_forward_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(gu.as<T>(), a.as<T>(), n, ffn_);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.t[kGateUp] = std::move(gu);
  return down_->forward(ctx, a, saved.sub[kDown]);
}

DTensor SwiGLU::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  DTensor da = down_->backward_input(ctx, dy, saved.sub[kDown]);
  DTensor& gu = saved.t[kGateUp];
  DTensor dgu(ctx.arena, gu.shape(), gu.dtype(), "swiglu pre-activation gradient");
  const std::int64_t n = da.numel();
  if (n > 0) {
    dispatch_float(gu.dtype(), [&](auto tag) {
      using T = decltype(tag);
      swiglu_backward_kernel<T>
          <<<grid_for(n), 256, 0, ctx.stream>>>(gu.as<T>(), da.as<T>(), dgu.as<T>(), n, ffn_);
    });
    CUDA_CHECK_LAUNCH();
  }
  gu.release();
  return gate_up_->backward_input(ctx, dgu, saved.sub[kGateUpLinear]);
}

void SwiGLU::backward_weight(Context& ctx, Saved& saved) {
  gate_up_->backward_weight(ctx, saved.sub[kGateUpLinear]);
  down_->backward_weight(ctx, saved.sub[kDown]);
  saved.clear();
}

std::vector<Param*> SwiGLU::params() { return {&gate_up_->weight, &down_->weight}; }

}  // namespace ppbench::cuda
