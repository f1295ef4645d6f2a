// SwiGLU feed-forward (Llama): y = (silu(x Wg) * (x Wu)) Wd, no biases, silu(z) = z sigmoid(z).
// Gate and up share one fused [hidden, 2 ffn] projection (columns gate | up, as Megatron's
// linear_fc1), so x is saved once; the parameter count is that of separate Wg and Wu.
#pragma once

#include <memory>

#include "workloads/cpu/layer.h"
#include "workloads/cpu/linear.h"

namespace ppbench::cpu {

template <typename T>
class SwiGLU final : public Layer<T> {
 public:
  SwiGLU(std::int64_t hidden, std::int64_t ffn, std::uint64_t seed);
  std::string name() const override { return "swiglu"; }

  // F keeps x (in gate_up), gu = [gate | up] pre-activations, and a = silu(gate) * up (in down).
  // I frees gu and keeps (x, d gu) and (a, dy) for W.
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override;

  Linear<T>& gate_up() { return *gate_up_; }
  Linear<T>& down() { return *down_; }

 private:
  std::int64_t ffn_;
  std::unique_ptr<Linear<T>> gate_up_;
  std::unique_ptr<Linear<T>> down_;
};

}  // namespace ppbench::cpu
