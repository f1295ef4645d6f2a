#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/reduce.h"

namespace ppbench::cuda {

namespace {

constexpr int kCols = 32;  // threads along the columns: coalesced row segments
constexpr int kRowThreads = 8;
constexpr int kRowsPerBlock = 256;

// Block (32, 8) sums a [kRowsPerBlock, 32] tile, then one atomic per column: the grid covers the
// rows in blocks so that tall inputs (every token of a micro-batch) keep all SMs busy.
template <typename T, bool kDot>
__global__ void col_reduce_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                  std::int64_t rows, std::int64_t cols, float* __restrict__ out) {
  __shared__ float part[kRowThreads][kCols];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kCols + threadIdx.x;
  float s = 0.0f;
  if (c < cols) {
    // Row blocks blockIdx.y, + gridDim.y, ...: gridDim.y is capped at 65535 (grid_y_for).
    for (std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kRowsPerBlock; r0 < rows;
         r0 += static_cast<std::int64_t>(gridDim.y) * kRowsPerBlock) {
      for (std::int64_t r = r0 + threadIdx.y; r < rows && r < r0 + kRowsPerBlock;
           r += kRowThreads) {
        const float v = to_f(a[r * cols + c]);
        s += kDot ? v * to_f(b[r * cols + c]) : v;
      }
    }
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int i = 1; i < kRowThreads; ++i) s += part[i][threadIdx.x];
    atomicAdd(out + c, s);
  }
}

template <bool kDot>
void col_reduce(Context& ctx, const DTensor& a, const DTensor* b, float* out) {
  const std::int64_t rows = a.rows(), cols = a.cols();
  if (rows == 0 || cols == 0) return;
  const dim3 grid(static_cast<unsigned>((cols + kCols - 1) / kCols),
                  grid_y_for((rows + kRowsPerBlock - 1) / kRowsPerBlock));
  const dim3 block(kCols, kRowThreads);
  dispatch_float(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    col_reduce_kernel<T, kDot>
        <<<grid, block, 0, ctx.stream>>>(a.as<T>(), b ? b->as<T>() : nullptr, rows, cols, out);
  });
  CUDA_CHECK_LAUNCH();
}

__global__ void add_f32_kernel(float* __restrict__ dst, const float* __restrict__ src,
                               std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    dst[i] += src[i];
  }
}

// Pass 1: block b sums elements b*256+t, +256*kStatsBlocks, ... of its threads, then the block in
// a fixed tree; pass 2 (one block) sums the kStatsBlocks partials in a fixed tree. Grid and
// block sizes are constants, so the order of every addition is too.
constexpr int kStatsThreads = 256;

__global__ void stats_partials_kernel(const float* __restrict__ x, std::int64_t n,
                                      double* __restrict__ partials) {
  __shared__ double sq[kStatsThreads], sm[kStatsThreads];
  double a = 0, b = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kStatsThreads + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(kStatsBlocks) * kStatsThreads) {
    const double v = x[i];
    a += v * v;
    b += v;
  }
  sq[threadIdx.x] = a;
  sm[threadIdx.x] = b;
  __syncthreads();
  for (int half = kStatsThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      sq[threadIdx.x] += sq[threadIdx.x + half];
      sm[threadIdx.x] += sm[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = sq[0];
    partials[2 * blockIdx.x + 1] = sm[0];
  }
}

__global__ void stats_final_kernel(double* __restrict__ partials) {
  __shared__ double sq[kStatsBlocks], sm[kStatsBlocks];
  sq[threadIdx.x] = partials[2 * threadIdx.x];
  sm[threadIdx.x] = partials[2 * threadIdx.x + 1];
  __syncthreads();
  for (int half = kStatsBlocks / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      sq[threadIdx.x] += sq[threadIdx.x + half];
      sm[threadIdx.x] += sm[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[0] = sq[0], partials[1] = sm[0];
}

}  // namespace

VectorStats vector_stats(Context& ctx, const float* x, std::int64_t n, double* scratch) {
  VectorStats out;
  if (n == 0) return out;
  stats_partials_kernel<<<kStatsBlocks, kStatsThreads, 0, ctx.stream>>>(x, n, scratch);
  CUDA_CHECK_LAUNCH();
  stats_final_kernel<<<1, kStatsBlocks, 0, ctx.stream>>>(scratch);
  CUDA_CHECK_LAUNCH();
  double host[2];
  CUDA_CHECK(cudaMemcpyAsync(host, scratch, sizeof host, cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  out.sum_squares = host[0];
  out.sum = host[1];
  return out;
}

void col_sum_accumulate(Context& ctx, const DTensor& x, float* out) {
  col_reduce<false>(ctx, x, nullptr, out);
}

void col_dot_accumulate(Context& ctx, const DTensor& a, const DTensor& b, float* out) {
  require(a.shape() == b.shape() && a.dtype() == b.dtype(), "col_dot: operands differ");
  col_reduce<true>(ctx, a, &b, out);
}

void add_f32(Context& ctx, float* dst, const float* src, std::int64_t n) {
  if (n == 0) return;
  add_f32_kernel<<<grid_for(n), 256, 0, ctx.stream>>>(dst, src, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ppbench::cuda
