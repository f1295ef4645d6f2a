// What LayerNorm, RMSNorm and BatchNorm share. All three compute y = xhat * gamma + beta over
// the [rows, C] view, with xhat standardised along one direction: LayerNorm and RMSNorm along
// each row (per token, over its C features), BatchNorm along each column (per channel, over the
// micro-batch's N*H*W positions). RMSNorm is the one without a shift (no beta).
//
// Their passes share one Saved layout: F keeps xhat and rstd. I reduces dgamma = sum dy*xhat and
// dbeta = sum dy over the rows, where the products are at hand, and frees xhat and rstd, so only
// those [C] vectors survive until W, which just adds them in. The Eigen code is in normalize.cpp,
// so this header stays Eigen-free like the other public ones.
#pragma once

#include <string>

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

template <typename T>
class Norm : public Layer<T> {
 public:
  std::string name() const final { return kind_; }
  void backward_weight(Saved<T>& saved) final;
  std::vector<Param<T>*> params() final;

  Param<T> gamma;  // 1
  Param<T> beta;   // 0; never initialised, and not a parameter, without a shift

 protected:
  enum Slot { kXhat, kRstd, kDGamma, kDBeta, kSlots };

  Norm(std::string kind, std::int64_t features, double eps, bool shift);

  // F's tail: saves xhat and rstd for I and returns xhat * gamma (+ beta).
  Tensor<T> scale_and_save(const Tensor<T>& x, Tensor<T> xhat, Tensor<T> rstd,
                           Saved<T>& saved) const;
  // I's head: checks dy against the saved xhat and reduces dgamma (and dbeta) into their slots.
  // BatchNorm's dx is written in terms of them, hence before dx rather than after.
  void reduce_param_grads(const Tensor<T>& dy, Saved<T>& saved) const;
  // I's tail: only the parameter gradients stay for W.
  static void release_stats(Saved<T>& saved);

  std::string kind_;
  std::int64_t c_;
  double eps_;
  bool shift_;
};

// Statistics per row: xhat = (x - mean) * rstd with rstd = 1 / sqrt(mean((x - mean)^2) + eps),
// where the mean is taken (LayerNorm) or fixed at 0 (RMSNorm: rstd from the mean square).
template <typename T>
class RowNorm : public Norm<T> {
 public:
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;

 protected:
  // Centred rows come with a shift (LayerNorm), uncentred ones without (RMSNorm).
  RowNorm(std::string kind, std::int64_t features, double eps, bool centered);

  bool centered_;
};

}  // namespace ppbench::cpu
