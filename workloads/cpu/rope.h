// Rotary position embedding on [batch, seq, heads * head_dim], rotate-half layout (Hugging Face
// Llama): within each head, element i pairs with element i + head_dim/2 and the pair is rotated
// by the angle pos * theta^(-2i/head_dim), pos = index in the sequence. A rotation has no
// parameters and its gradient is the inverse rotation, so nothing is saved.
#pragma once

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

// Rotates x in place; inverse = true applies the transpose (the backward).
template <typename T>
void rope_rotate(Tensor<T>& x, std::int64_t heads, std::int64_t head_dim, double theta,
                 bool inverse);

template <typename T>
class RotaryEmbedding final : public Layer<T> {
 public:
  RotaryEmbedding(std::int64_t heads, std::int64_t head_dim, double theta = 10000.0);
  std::string name() const override { return "rope"; }
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;

 private:
  std::int64_t heads_;
  std::int64_t head_dim_;
  double theta_;
};

}  // namespace ppbench::cpu
