// Linear layer y = x W + b over the last dimension. W is stored [in, out] so that the forward is
// one row-major GEMM over all tokens (or pixels) of the micro-batch.
#pragma once

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

template <typename T>
class Linear final : public Layer<T> {
 public:
  // Initialised like PyTorch's nn.Linear: W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
  Linear(std::int64_t in, std::int64_t out, bool with_bias, std::uint64_t seed);
  std::string name() const override { return "linear"; }

  // F keeps x (W's need); I adds dy (W's other need) and keeps x: M_W = |x| + |dy|.
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override;

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

  Param<T> weight;  // [in, out]
  Param<T> bias;    // [out]; empty when built without bias

 private:
  std::int64_t in_;
  std::int64_t out_;
  bool has_bias_;
};

}  // namespace ppbench::cpu
