// RMSNorm over the last dimension (Llama): y = x / sqrt(mean(x^2) + eps) * gamma, per token.
// Saved policy as cpu::RMSNorm: F keeps xhat (layer dtype) and rstd (f32); I computes dx and
// reduces dgamma = sum_rows dy * xhat into an f32 [C] vector, freeing xhat and rstd; W adds
// dgamma into gamma.grad.
#pragma once

#include "workloads/cuda/normalize.h"

namespace ppbench::cuda {

class RMSNorm final : public Norm {
 public:
  // gamma = 1, no beta.
  RMSNorm(DeviceArena& params, std::int64_t features, DType dtype, double eps = 1e-5);
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
};

}  // namespace ppbench::cuda
