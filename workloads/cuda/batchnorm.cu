#include "workloads/cuda/batchnorm.h"
#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/norm_saved.h"
#include "workloads/cuda/reduce.h"

namespace ppbench::cuda {

namespace {

using namespace norm;      // the shared slot layout
constexpr int kCols = 32;  // channels per block: each row segment is one coalesced load
constexpr int kRowThreads = 8;
constexpr int kRowsPerBlock = 256;

// Second pass of the statistics: sq[c] += sum over a block of rows of (x - mean)^2, with mean =
// sum[c] / rows from the first pass (col_sum_accumulate). Two passes keep the variance free of
// the cancellation of E[x^2] - mean^2; spreading the rows over the grid in blocks (one atomic per
// column and block) keeps every SM busy when C is small and N*H*W large, as in AmoebaNet's early
// cells. The atomics make the last bits of the statistics depend on the order of the blocks.
template <typename T>
__global__ void bn_centered_sq_kernel(const T* __restrict__ x, std::int64_t rows, int cols,
                                      const float* __restrict__ sum, float* __restrict__ sq) {
  __shared__ float part[kRowThreads][kCols];
  const int c = blockIdx.x * kCols + threadIdx.x;
  float q = 0.0f;
  if (c < cols) {
    const float mean = sum[c] / static_cast<float>(rows);
    // Row blocks blockIdx.y, + gridDim.y, ...: gridDim.y is capped at 65535 (grid_y_for).
    for (std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kRowsPerBlock; r0 < rows;
         r0 += static_cast<std::int64_t>(gridDim.y) * kRowsPerBlock) {
      for (std::int64_t r = r0 + threadIdx.y; r < rows && r < r0 + kRowsPerBlock;
           r += kRowThreads) {
        const float d = to_f(x[r * cols + c]) - mean;
        q += d * d;
      }
    }
  }
  part[threadIdx.y][threadIdx.x] = q;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int i = 1; i < kRowThreads; ++i) q += part[i][threadIdx.x];
    atomicAdd(sq + c, q);
  }
}

// sum -> mean and sq -> rstd, in place, per channel.
__global__ void bn_finalize_kernel(float* __restrict__ mean, float* __restrict__ rstd,
                                   std::int64_t rows, int cols, float eps) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  mean[c] /= static_cast<float>(rows);
  rstd[c] = rsqrtf(rstd[c] / static_cast<float>(rows) + eps);
}

template <typename T>
__global__ void bn_apply_kernel(const T* __restrict__ x, const float* __restrict__ mean,
                                const float* __restrict__ rstd, const T* __restrict__ gamma,
                                const T* __restrict__ beta, T* __restrict__ xhat, T* __restrict__ y,
                                std::int64_t n, int cols) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % cols);
    const float h = (to_f(x[i]) - mean[c]) * rstd[c];
    xhat[i] = from_f<T>(h);
    y[i] = from_f<T>(h * to_f(gamma[c]) + to_f(beta[c]));
  }
}

// dx = gamma * rstd / M * (M dy - dbeta - xhat * dgamma), M = rows (the CPU's formula).
template <typename T>
__global__ void bn_backward_kernel(const T* __restrict__ dy, const T* __restrict__ xhat,
                                   const float* __restrict__ rstd, const T* __restrict__ gamma,
                                   const float* __restrict__ dgamma,
                                   const float* __restrict__ dbeta, T* __restrict__ dx,
                                   std::int64_t n, int cols, float m) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % cols);
    const float scale = to_f(gamma[c]) * rstd[c] / m;
    dx[i] = from_f<T>(scale * (m * to_f(dy[i]) - dbeta[c] - to_f(xhat[i]) * dgamma[c]));
  }
}

}  // namespace

BatchNorm::BatchNorm(DeviceArena& params, std::int64_t channels, DType dtype, double eps)
    : Norm(params, "batchnorm", "channels", channels, dtype, eps, /*shift=*/true) {}

DTensor BatchNorm::forward(Context& ctx, const DTensor& x, Saved& saved) {
  require(x.cols() == c_ && x.dtype() == dtype_, "batchnorm: bad input " + shape_text(x.shape()));
  require(x.rows() > 1, "batchnorm: needs more than one value per channel");
  const std::int64_t rows = x.rows();
  DTensor xhat(ctx.arena, x.shape(), dtype_, "batchnorm xhat");
  DTensor rstd(ctx.arena, {c_}, DType::kF32, "batchnorm rstd");
  DTensor mean(ctx.arena, {c_}, DType::kF32, "batchnorm mean");
  DTensor y(ctx.arena, x.shape(), dtype_, "batchnorm output");
  const int cols = static_cast<int>(c_);
  // mean holds the column sums and rstd the centred sums of squares until finalised.
  zero(mean, ctx.stream);
  zero(rstd, ctx.stream);
  col_sum_accumulate(ctx, x, mean.as<float>());
  const dim3 grid(static_cast<unsigned>((c_ + kCols - 1) / kCols),
                  grid_y_for((rows + kRowsPerBlock - 1) / kRowsPerBlock));
  dispatch_float(dtype_, [&](auto tag) {
    using T = decltype(tag);
    bn_centered_sq_kernel<T><<<grid, dim3(kCols, kRowThreads), 0, ctx.stream>>>(
        x.as<T>(), rows, cols, mean.as<float>(), rstd.as<float>());
    CUDA_CHECK_LAUNCH();
    bn_finalize_kernel<<<grid_for(c_), 256, 0, ctx.stream>>>(mean.as<float>(), rstd.as<float>(),
                                                             rows, cols, eps_);
    CUDA_CHECK_LAUNCH();
    bn_apply_kernel<T><<<grid_for(x.numel()), 256, 0, ctx.stream>>>(
        x.as<T>(), mean.as<float>(), rstd.as<float>(), gamma.value.as<T>(), beta.value.as<T>(),
        xhat.as<T>(), y.as<T>(), x.numel(), cols);
    CUDA_CHECK_LAUNCH();
  });
  save_stats(saved, x.shape(), std::move(xhat), std::move(rstd));
  return y;
}

DTensor BatchNorm::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  const DTensor& xhat = saved.t[kXhat];
  require(dy.shape() == xhat.shape() && dy.dtype() == dtype_, "batchnorm: bad output gradient");
  DTensor dgamma(ctx.arena, {c_}, DType::kF32, "batchnorm dgamma");
  DTensor dbeta(ctx.arena, {c_}, DType::kF32, "batchnorm dbeta");
  zero(dgamma, ctx.stream);
  zero(dbeta, ctx.stream);
  col_dot_accumulate(ctx, dy, xhat, dgamma.as<float>());
  col_sum_accumulate(ctx, dy, dbeta.as<float>());
  DTensor dx(ctx.arena, xhat.shape(), dtype_, "batchnorm input gradient");
  dispatch_float(dtype_, [&](auto tag) {
    using T = decltype(tag);
    bn_backward_kernel<T><<<grid_for(dx.numel()), 256, 0, ctx.stream>>>(
        dy.as<T>(), xhat.as<T>(), saved.t[kRstd].as<float>(), gamma.value.as<T>(),
        dgamma.as<float>(), dbeta.as<float>(), dx.as<T>(), dx.numel(), static_cast<int>(c_),
        static_cast<float>(xhat.rows()));
  });
  CUDA_CHECK_LAUNCH();
  keep_param_grads(saved, std::move(dgamma), std::move(dbeta));
  return dx;
}

}  // namespace ppbench::cuda
