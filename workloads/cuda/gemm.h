// GEMMs through cuBLASLt on row-major buffers, the layout of every ppbench tensor:
//
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C (+ bias[n] broadcast over rows)
//
// A is stored [m, k] (or [k, m] when trans_a), B stored [k, n] (or [n, k] when trans_b), rows
// contiguous. A and B share a type (bf16 or fp32); C is that type or fp32 (bf16 inputs into fp32
// outputs accumulate weight gradients and attention scores in full precision). Compute and
// accumulation are always fp32 (CUBLAS_COMPUTE_32F; never TF32, so fp32 results match a float64
// reference to ~1e-6). `batch` > 1 runs a strided batch (element strides, 0 broadcasts).
//
// Linear layers use: Y = X W^T + b, dX = dY W, dW += dY^T X, with W stored [out, in] like
// PyTorch's nn.Linear (the CPU kernels store W [in, out]; tests transpose).
#pragma once

#include <cstdint>

#include "workloads/cuda/context.h"
#include "workloads/cuda/dtype.h"

namespace ppbench::cuda {

struct GemmBatch {
  int count = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

void gemm(Context& ctx, std::int64_t m, std::int64_t n, std::int64_t k, const void* a, bool trans_a,
          const void* b, bool trans_b, DType ab_type, void* c, DType c_type, float alpha = 1.0f,
          float beta = 0.0f, const void* bias = nullptr, GemmBatch batch = {});

}  // namespace ppbench::cuda
