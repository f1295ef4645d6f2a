// Device helpers shared by the kernels (included by .cu files only): bf16/fp32 loads and stores
// in fp32 arithmetic, block reductions, launch sizes and the dtype dispatch of launchers.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "workloads/cuda/check.h"
#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  __shared__ float total;
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // `part` may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < static_cast<int>(blockDim.x / 32) ? part[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}
__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  __shared__ float total;
  v = warp_max(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < static_cast<int>(blockDim.x / 32) ? part[lane] : -INFINITY;
    s = warp_max(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

inline unsigned int grid_for(std::int64_t n, int threads = 256) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned int>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

// gridDim.y (and .z) may not exceed 65535: a kernel tiling a long dimension over blockIdx.y loops
// over its tiles blockIdx.y, blockIdx.y + gridDim.y, ... when there are more.
inline unsigned int grid_y_for(std::int64_t tiles) {
  return static_cast<unsigned int>(tiles < 65535 ? (tiles > 0 ? tiles : 1) : 65535);
}

// Calls f(T{}) with T the C++ type of a floating dtype: one instantiation per dtype, no more.
template <typename F>
void dispatch_float(DType t, F&& f) {
  if (t == DType::kBF16) {
    f(bf16{});
  } else {
    require(t == DType::kF32, "expected a bf16 or f32 tensor");
    f(float{});
  }
}

}  // namespace ppbench::cuda
