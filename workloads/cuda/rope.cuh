// The rotary angle of (position p, pair i) for head_dim d, shared by the RoPE layer and the
// attention kernels. Computed in double, like the CPU kernel's table, then rounded: positions up
// to 10^5 times frequencies near 1 would lose ~1e-3 of the angle in float.
#pragma once

#include <cuda_runtime.h>

namespace ppbench::cuda {

__device__ __forceinline__ void rope_cos_sin(std::int64_t p, std::int64_t i, std::int64_t d,
                                             double theta, float* c, float* s) {
  const double freq = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  double sd, cd;
  sincos(static_cast<double>(p) * freq, &sd, &cd);
  *c = static_cast<float>(cd);
  *s = static_cast<float>(sd);
}

}  // namespace ppbench::cuda
