// Pointwise activations (mirrors workloads/cpu/activations.h). No parameters: I frees everything.
#pragma once

#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

// GeLU, tanh approximation as the CPU kernel: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Keeps its input x for I.
class GeLU final : public Layer {
 public:
  std::string name() const override { return "gelu"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
};

// ReLU. Keeps its output y, as the CPU kernel (and an in-place ReLU) does.
class ReLU final : public Layer {
 public:
  std::string name() const override { return "relu"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
};

}  // namespace ppbench::cuda
