// Pointwise activations. No parameters: I frees everything, W has nothing to do.
#pragma once

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

// GeLU, tanh approximation (as GPT-2, llm.c and Megatron's bias_gelu use):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Keeps its input x for I.
template <typename T>
class GeLU final : public Layer<T> {
 public:
  std::string name() const override { return "gelu"; }
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
};

// ReLU. Keeps its output y (y > 0 exactly where x > 0), as an in-place ReLU would.
template <typename T>
class ReLU final : public Layer<T> {
 public:
  std::string name() const override { return "relu"; }
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
};

}  // namespace ppbench::cpu
