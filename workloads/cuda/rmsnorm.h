// RMSNorm over the last dimension (Llama): y = x / sqrt(mean(x^2) + eps) * gamma, per token.
// Saved policy as cpu::RMSNorm: F keeps xhat (layer dtype) and rstd (f32); I computes dx and
// reduces dgamma = sum_rows dy * xhat into an f32 [C] vector, freeing xhat and rstd; W adds
// dgamma into gamma.grad.
#pragma once

#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

class RMSNorm final : public Layer {
 public:
  RMSNorm(DeviceArena& params, std::int64_t features, DType dtype, double eps = 1e-5);
  std::string name() const override { return "rmsnorm"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override { return {&gamma}; }

  Param gamma;

 private:
  std::int64_t c_;
  DType dtype_;
  float eps_;
};

}  // namespace ppbench::cuda
