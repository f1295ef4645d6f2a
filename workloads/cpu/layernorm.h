// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * gamma + beta, with the
// biased variance, per token.
#pragma once

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

template <typename T>
class LayerNorm final : public Layer<T> {
 public:
  // gamma = 1, beta = 0 (no randomness, so no seed).
  explicit LayerNorm(std::int64_t features, double eps = 1e-5);
  std::string name() const override { return "layernorm"; }

  // F keeps xhat [rows, C] and rstd [rows]. I computes dx and also reduces dgamma = sum dy*xhat
  // and dbeta = sum dy (two [C] vectors), so that only those survive until W.
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override { return {&gamma, &beta}; }

  Param<T> gamma;
  Param<T> beta;

 private:
  std::int64_t c_;
  double eps_;
};

}  // namespace ppbench::cpu
