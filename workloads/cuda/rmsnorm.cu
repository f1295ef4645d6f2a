#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/norm_saved.h"
#include "workloads/cuda/reduce.h"
#include "workloads/cuda/rmsnorm.h"

namespace ppbench::cuda {

namespace {

using namespace norm;  // the shared slot layout
constexpr int kThreads = 256;

// One block per token row: the row's statistics need a reduction over all C features.
template <typename T>
__global__ void rmsnorm_forward_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                       T* __restrict__ xhat, float* __restrict__ rstd,
                                       T* __restrict__ y, int c, float eps) {
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * c;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    const float v = to_f(xr[i]);
    ss += v * v;
  }
  const float rs = rsqrtf(block_sum(ss) / static_cast<float>(c) + eps);
  if (threadIdx.x == 0) rstd[row] = rs;
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    const float h = to_f(xr[i]) * rs;
    xhat[row * c + i] = from_f<T>(h);
    y[row * c + i] = from_f<T>(h * to_f(gamma[i]));
  }
}

// dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), dxhat = dy * gamma.
template <typename T>
__global__ void rmsnorm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ xhat,
                                        const float* __restrict__ rstd, const T* __restrict__ gamma,
                                        T* __restrict__ dx, int c) {
  const std::int64_t row = blockIdx.x;
  const T* dyr = dy + row * c;
  const T* hr = xhat + row * c;
  float s = 0.0f;
  for (int i = threadIdx.x; i < c; i += blockDim.x)
    s += to_f(dyr[i]) * to_f(gamma[i]) * to_f(hr[i]);
  const float m = block_sum(s) / static_cast<float>(c);
  const float rs = rstd[row];
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    dx[row * c + i] = from_f<T>(rs * (to_f(dyr[i]) * to_f(gamma[i]) - to_f(hr[i]) * m));
  }
}

}  // namespace

RMSNorm::RMSNorm(DeviceArena& params, std::int64_t features, DType dtype, double eps)
    : Norm(params, "rmsnorm", "features", features, dtype, eps, /*shift=*/false) {}

DTensor RMSNorm::forward(Context& ctx, const DTensor& x, Saved& saved) {
  require(x.cols() == c_ && x.dtype() == dtype_, "rmsnorm: bad input " + shape_text(x.shape()));
  const std::int64_t n = x.rows();
  DTensor xhat(ctx.arena, x.shape(), dtype_, "rmsnorm xhat");
  DTensor rstd(ctx.arena, {n}, DType::kF32, "rmsnorm rstd");
  DTensor y(ctx.arena, x.shape(), dtype_, "rmsnorm output");
  if (n > 0) {
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      rmsnorm_forward_kernel<T><<<static_cast<unsigned>(n), kThreads, 0, ctx.stream>>>(
          x.as<T>(), gamma.value.as<T>(), xhat.as<T>(), rstd.as<float>(), y.as<T>(),
          static_cast<int>(c_), eps_);
    });
    CUDA_CHECK_LAUNCH();
  }
  save_stats(saved, x.shape(), std::move(xhat), std::move(rstd));
  return y;
}

DTensor RMSNorm::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  DTensor& xhat = saved.t[kXhat];
  require(dy.shape() == xhat.shape() && dy.dtype() == dtype_, "rmsnorm: bad output gradient");
  const std::int64_t n = xhat.rows();
  DTensor dx(ctx.arena, xhat.shape(), dtype_, "rmsnorm input gradient");
  DTensor dgamma(ctx.arena, {c_}, DType::kF32, "rmsnorm dgamma");
  zero(dgamma, ctx.stream);
  if (n > 0) {
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      rmsnorm_backward_kernel<T><<<static_cast<unsigned>(n), kThreads, 0, ctx.stream>>>(
          dy.as<T>(), xhat.as<T>(), saved.t[kRstd].as<float>(), gamma.value.as<T>(), dx.as<T>(),
          static_cast<int>(c_));
    });
    CUDA_CHECK_LAUNCH();
    col_dot_accumulate(ctx, dy, xhat, dgamma.as<float>());
  }
  keep_param_grads(saved, std::move(dgamma));
  return dx;
}

}  // namespace ppbench::cuda
