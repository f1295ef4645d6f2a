// Causal grouped-query self-attention on [batch, seq, hidden]:
//   qkv = x Wqkv (+b)  (one fused projection: heads + 2 kv_heads blocks of head_dim columns,
//                       in the order q | k | v, so the input x is saved once)
//   q, k <- RoPE(q, k)  (optional; GPipe's Transformer has none)
//   o_h = softmax(q_h k_g^T / sqrt(head_dim) + causal mask) v_g,  g = h / (heads / kv_heads)
//   y = o Wo (+b)
// The s x s probabilities are materialised per (batch, head): fine on CPU at ppbench's sizes.
#pragma once

#include <memory>

#include "workloads/cpu/layer.h"
#include "workloads/cpu/linear.h"
#include "workloads/layer_configs.h"

namespace ppbench::cpu {

using ::ppbench::AttentionConfig;

template <typename T>
class Attention final : public Layer<T> {
 public:
  Attention(const AttentionConfig& config, std::uint64_t seed);
  std::string name() const override { return "attention"; }

  // F keeps x (in the qkv projection), q and k after RoPE, v, the probabilities P
  // [batch, heads, seq, seq] and o (in the output projection). I frees q, k, v, P and keeps only
  // the two projections' (input, output gradient) pairs for W.
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override;

  const AttentionConfig& config() const { return cfg_; }
  Linear<T>& qkv() { return *qkv_; }
  Linear<T>& out() { return *out_; }

 private:
  AttentionConfig cfg_;
  std::unique_ptr<Linear<T>> qkv_;
  std::unique_ptr<Linear<T>> out_;
};

}  // namespace ppbench::cpu
