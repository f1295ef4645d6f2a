// RMSNorm over the last dimension (Llama): y = x / sqrt(mean(x^2) + eps) * gamma, per token.
#pragma once

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

template <typename T>
class RMSNorm final : public Layer<T> {
 public:
  // gamma = 1.
  explicit RMSNorm(std::int64_t features, double eps = 1e-5);
  std::string name() const override { return "rmsnorm"; }

  // F keeps xhat = x * rstd and rstd; I reduces dgamma = sum dy*xhat ([C]) and frees the rest.
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override { return {&gamma}; }

  Param<T> gamma;

 private:
  std::int64_t c_;
  double eps_;
};

}  // namespace ppbench::cpu
