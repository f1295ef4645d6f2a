#include "workloads/cuda/activations.h"
#include "workloads/cuda/kernel_util.cuh"

namespace ppbench::cuda {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

#define PPB_GRID_STRIDE(i, n)                                                                      \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void gelu_forward_kernel(const T* __restrict__ x, T* __restrict__ y, std::int64_t n) {
  PPB_GRID_STRIDE(i, n) {
    const float v = to_f(x[i]);
    y[i] = from_f<T>(0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v))));
  }
}

template <typename T>
__global__ void gelu_backward_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                     T* __restrict__ dx, std::int64_t n) {
  PPB_GRID_STRIDE(i, n) {
    const float v = to_f(x[i]);
    const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float dt = (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = from_f<T>(to_f(dy[i]) * (0.5f * (1.0f + t) + 0.5f * v * dt));
  }
}

template <typename T>
__global__ void relu_forward_kernel(const T* __restrict__ x, T* __restrict__ y, std::int64_t n) {
  PPB_GRID_STRIDE(i, n) { y[i] = from_f<T>(fmaxf(to_f(x[i]), 0.0f)); }
}

template <typename T>
__global__ void relu_backward_kernel(const T* __restrict__ y, const T* __restrict__ dy,
                                     T* __restrict__ dx, std::int64_t n) {
  PPB_GRID_STRIDE(i, n) { dx[i] = to_f(y[i]) > 0.0f ? dy[i] : from_f<T>(0.0f); }
}

void check_same(const DTensor& a, const DTensor& b, const char* who) {
  require(a.shape() == b.shape() && a.dtype() == b.dtype(),
          std::string(who) + ": bad output gradient " + shape_text(b.shape()));
}

}  // namespace

DTensor GeLU::forward(Context& ctx, const DTensor& x, Saved& saved) {
  DTensor y(ctx.arena, x.shape(), x.dtype(), "gelu output");
  const std::int64_t n = x.numel();
  if (n > 0) {
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      gelu_forward_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(x.as<T>(), y.as<T>(), n);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  saved.in_shape = x.shape();
  saved.t.push_back(x);
  return y;
}

DTensor GeLU::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  const DTensor& x = saved.t.at(0);
  check_same(x, dy, "gelu");
  DTensor dx(ctx.arena, x.shape(), x.dtype(), "gelu input gradient");
  const std::int64_t n = x.numel();
  if (n > 0) {
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      gelu_backward_kernel<T>
          <<<grid_for(n), 256, 0, ctx.stream>>>(x.as<T>(), dy.as<T>(), dx.as<T>(), n);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  return dx;
}

DTensor ReLU::forward(Context& ctx, const DTensor& x, Saved& saved) {
  DTensor y(ctx.arena, x.shape(), x.dtype(), "relu output");
  const std::int64_t n = x.numel();
  if (n > 0) {
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      relu_forward_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(x.as<T>(), y.as<T>(), n);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  saved.in_shape = x.shape();
  saved.t.push_back(y);
  return y;
}

DTensor ReLU::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  const DTensor& y = saved.t.at(0);
  check_same(y, dy, "relu");
  DTensor dx(ctx.arena, y.shape(), y.dtype(), "relu input gradient");
  const std::int64_t n = y.numel();
  if (n > 0) {
    dispatch_float(y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      relu_backward_kernel<T>
          <<<grid_for(n), 256, 0, ctx.stream>>>(y.as<T>(), dy.as<T>(), dx.as<T>(), n);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  return dx;
}

}  // namespace ppbench::cuda
