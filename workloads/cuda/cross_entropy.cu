#include "workloads/cuda/cross_entropy.h"
#include "workloads/cuda/kernel_util.cuh"

namespace ppbench::cuda {

namespace {

enum Slot { kProbs, kTargets, kSlots };
constexpr int kThreads = 256;

// One block per row: max, sum of exponentials, probabilities, and the row's loss term.
template <typename T>
__global__ void xent_forward_kernel(const T* __restrict__ z, const std::int32_t* __restrict__ tgt,
                                    T* __restrict__ probs, float* __restrict__ row_loss,
                                    int classes) {
  const std::int64_t r = blockIdx.x;
  const T* zr = z + r * classes;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < classes; i += blockDim.x) m = fmaxf(m, to_f(zr[i]));
  m = block_max(m);
  float s = 0.0f;
  for (int i = threadIdx.x; i < classes; i += blockDim.x) s += expf(to_f(zr[i]) - m);
  s = block_sum(s);
  const float inv = 1.0f / s;
  for (int i = threadIdx.x; i < classes; i += blockDim.x) {
    probs[r * classes + i] = from_f<T>(expf(to_f(zr[i]) - m) * inv);
  }
  if (threadIdx.x == 0) row_loss[r] = logf(s) + m - to_f(zr[tgt[r]]);
}

// The mean of the rows' terms, in double and in a fixed order (one block: thread t takes rows t,
// t + kThreads, ..., then a fixed tree), so that a step's loss is the same bits on every run, as
// the CPU's sum in double is; atomics would add the rows in whatever order blocks finish.
__global__ void xent_mean_kernel(const float* __restrict__ row_loss, std::int64_t rows,
                                 float* __restrict__ loss) {
  __shared__ double part[kThreads];
  double a = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += kThreads) a += row_loss[r];
  part[threadIdx.x] = a;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = static_cast<float>(part[0] / static_cast<double>(rows));
}

template <typename T>
__global__ void xent_backward_kernel(T* __restrict__ p, const std::int32_t* __restrict__ tgt,
                                     std::int64_t n, int classes, float k) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / classes;
    const int c = static_cast<int>(i % classes);
    p[i] = from_f<T>(k * (to_f(p[i]) - (c == tgt[r] ? 1.0f : 0.0f)));
  }
}

}  // namespace

DTensor SoftmaxCrossEntropy::forward(Context& ctx, const DTensor& logits, const DTensor& targets,
                                     Saved& saved) {
  const std::int64_t rows = logits.rows(), classes = logits.cols();
  require(targets.dtype() == DType::kI32 && targets.numel() == rows,
          "cross-entropy: one int32 target per row");
  DTensor probs(ctx.arena, logits.shape(), logits.dtype(), "cross-entropy probabilities");
  DTensor loss(ctx.arena, {1}, DType::kF32, "cross-entropy loss");
  if (rows == 0) zero(loss, ctx.stream);  // the mean of no rows
  if (rows > 0) {
    DTensor row_loss(ctx.arena, {rows}, DType::kF32, "cross-entropy row losses");
    dispatch_float(logits.dtype(), [&](auto tag) {
      using T = decltype(tag);
      xent_forward_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, ctx.stream>>>(
          logits.as<T>(), targets.as<std::int32_t>(), probs.as<T>(), row_loss.as<float>(),
          static_cast<int>(classes));
    });
    CUDA_CHECK_LAUNCH();
    xent_mean_kernel<<<1, kThreads, 0, ctx.stream>>>(row_loss.as<float>(), rows, loss.as<float>());
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  saved.in_shape = logits.shape();
  saved.t.resize(kSlots);
  saved.t[kProbs] = std::move(probs);
  saved.t[kTargets] = targets;
  return loss;
}

DTensor SoftmaxCrossEntropy::backward_input(Context& ctx, Saved& saved, float scale) {
  DTensor dz = std::move(saved.t[kProbs]);
  const std::int64_t rows = dz.rows(), n = dz.numel();
  if (n > 0) {
    dispatch_float(dz.dtype(), [&](auto tag) {
      using T = decltype(tag);
      xent_backward_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(
          dz.as<T>(), saved.t[kTargets].as<std::int32_t>(), n, static_cast<int>(dz.cols()),
          scale / static_cast<float>(rows));
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  return dz;
}

}  // namespace ppbench::cuda
