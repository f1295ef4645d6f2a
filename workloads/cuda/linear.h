// Linear layer Y = X W^T + b over the last dimension, W stored [out, in] (nn.Linear's layout, so
// the forward is one cuBLASLt GEMM with W transposed and the bias fused as its epilogue).
// Same saved-tensor policy as cpu::Linear: F keeps x, I adds dy, W computes dW += dY^T X and
// db += colsum(dY) and empties Saved.
#pragma once

#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

class Linear final : public Layer {
 public:
  // Parameters drawn exactly as cpu::Linear(in, out, bias, seed) draws them (then transposed),
  // so a GPU and a CPU model built from one seed hold the same weights up to rounding.
  Linear(DeviceArena& params, std::int64_t in, std::int64_t out, bool with_bias, DType dtype,
         std::uint64_t seed);
  std::string name() const override { return "linear"; }

  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override;
  // The input x a forward kept in `saved` (until W), for layers that need it again in their own
  // backward without keeping a second reference (fused attention's rowsum(dO * O)).
  static const DTensor& saved_input(const Saved& saved);

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  DType dtype() const { return dtype_; }

  Param weight;  // [out, in]
  Param bias;    // [out]; empty without bias

 private:
  std::int64_t in_;
  std::int64_t out_;
  bool has_bias_;
  DType dtype_;
};

}  // namespace ppbench::cuda
