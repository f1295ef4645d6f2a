// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * gamma + beta (biased
// variance), per token. As cpu::LayerNorm, the gamma/beta gradients are reduced in I (where dy
// and xhat are at hand) into two f32 [C] vectors, so that only those survive until W, which adds
// them into the gradients: the totals equal the CPU's, and M_W is 2C floats.
#pragma once

#include "workloads/cuda/normalize.h"

namespace ppbench::cuda {

class LayerNorm final : public Norm {
 public:
  // gamma = 1, beta = 0.
  LayerNorm(DeviceArena& params, std::int64_t features, DType dtype, double eps = 1e-5);
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
};

}  // namespace ppbench::cuda
