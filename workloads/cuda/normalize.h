// What LayerNorm, RMSNorm and BatchNorm share, as cpu::Norm (workloads/cpu/normalize.h): gamma
// (1) and beta (0, absent without a shift: RMSNorm), their sizes and dtype, and the W pass, which
// adds the [C] gradients that I reduced (norm_saved.h) into gamma and beta. Each layer has its own
// F and I kernels.
#pragma once

#include <string>
#include <vector>

#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

class Norm : public Layer {
 public:
  std::string name() const final { return kind_; }
  void backward_weight(Context& ctx, Saved& saved) final;
  std::vector<Param*> params() final;

  Param gamma;
  Param beta;  // never allocated without a shift

 protected:
  // `size_name` names c in the message that refuses c <= 0 ("features", "channels").
  Norm(DeviceArena& params, std::string kind, const char* size_name, std::int64_t c, DType dtype,
       double eps, bool shift);

  std::string kind_;
  std::int64_t c_;
  DType dtype_;
  float eps_;
  bool shift_;
};

}  // namespace ppbench::cuda
