// Batch norm over the channel (last) dimension of an NHWC tensor with PER-MICRO-BATCH statistics,
// as cpu::BatchNorm: mean and biased variance over the N*H*W positions of the micro-batch being
// processed (GPipe's semantics; no running statistics, ppbench only trains).
//
// Saved policy as the CPU's Norm: F keeps xhat (layer dtype) and rstd (f32 [C]); I reduces
// dgamma = sum dy*xhat and dbeta = sum dy (f32 [C]), which its dx formula needs anyway, keeps
// those two for W and frees xhat and rstd; W adds them into the gradients.
#pragma once

#include "workloads/cuda/normalize.h"

namespace ppbench::cuda {

class BatchNorm final : public Norm {
 public:
  // gamma = 1, beta = 0.
  BatchNorm(DeviceArena& params, std::int64_t channels, DType dtype, double eps = 1e-5);
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
};

}  // namespace ppbench::cuda
