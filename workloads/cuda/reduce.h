// Column reductions over [rows, cols] matrices into f32 vectors: the bias and norm-parameter
// gradients (sums over every token of a micro-batch).
#pragma once

#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

// out[c] += sum_r x[r, c]
void col_sum_accumulate(Context& ctx, const DTensor& x, float* out);
// out[c] += sum_r a[r, c] * b[r, c]   (a and b of one shape and dtype)
void col_dot_accumulate(Context& ctx, const DTensor& a, const DTensor& b, float* out);
// dst[i] += src[i], f32
void add_f32(Context& ctx, float* dst, const float* src, std::int64_t n);

// Sum of squares and sum of an f32 vector, accumulated in double in a fixed order (the same bits
// on every call), for gradient statistics that never leave the device. `scratch` holds
// 2 * kStatsBlocks doubles; waits for ctx.stream and returns on the host.
constexpr int kStatsBlocks = 256;
struct VectorStats {
  double sum_squares = 0, sum = 0;
};
VectorStats vector_stats(Context& ctx, const float* x, std::int64_t n, double* scratch);

}  // namespace ppbench::cuda
