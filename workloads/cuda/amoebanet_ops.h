// AmoebaNet-D's ops on the GPU, as workloads/cpu/amoebanet_ops.h, built from the GPU kernels
// with the CPU's seeds so both backends hold the same parameters:
//   conv1x1      ReLU-1x1 conv-BN, c -> c
//   conv3x3      ReLU-conv-BN three times: 1x1 c -> c/4, 3x3 (strided), 1x1 back to c
//   conv1x7-7x1  ReLU-conv-BN four times: 1x1 c -> c/4, 1x7, 7x1, 1x1 back to c
//   max-pool 3x3 (pad 1), max-pool 2x2 (pad 0), avg-pool 3x3 (pad 1, padding not counted)
//   none         identity; at stride 2 a factorized reduce c -> c
// The cells, stem and classifier built from them are in amoebanet_cells.h.
#pragma once

#include "workloads/amoebanet_genotype.h"
#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

// ReLU -> conv (kh x kw, stride, "same" padding, no bias) -> BatchNorm, a Sequential whose
// Saved.sub is {relu, conv, bn}, as cpu::make_relu_conv_bn.
LayerPtr make_relu_conv_bn(DeviceArena& params, std::int64_t cin, std::int64_t cout,
                           std::int64_t kh, std::int64_t kw, std::int64_t stride, DType dtype,
                           std::uint64_t seed);

LayerPtr make_amoeba_op(DeviceArena& params, AmoebaOp op, std::int64_t channels,
                        std::int64_t stride, DType dtype, std::uint64_t seed);

// y = x (the same buffer). Keeps nothing.
class Identity final : public Layer {
 public:
  std::string name() const override { return "identity"; }
  DTensor forward(Context& /*ctx*/, const DTensor& x, Saved& saved) override {
    saved.clear();
    saved.in_shape = x.shape();
    return x;
  }
  DTensor backward_input(Context& /*ctx*/, const DTensor& dy, Saved& saved) override {
    require(dy.shape() == saved.in_shape, "identity: bad output gradient");
    saved.clear();
    return dy;
  }
};

// As cpu::FactorizedReduce: ReLU, two 1x1 convs to cout/2 channels each on the even pixels
// (0, 0), (0, 2) ... and on the pixels shifted by one (1, 1), (1, 3) ... (zero past the border),
// concatenated, BatchNorm; output ceil(H/2) x ceil(W/2). The convs run pointwise on the two
// quarter-size picks (pick_pixels.h), so each keeps its pick for W, not the full-size input.
// Saved.sub = {relu, conv_even, conv_odd, bn}; the convs' seeds are derive_seed(seed, 0 / 1).
class FactorizedReduce final : public Layer {
 public:
  FactorizedReduce(DeviceArena& params, std::int64_t cin, std::int64_t cout, DType dtype,
                   std::uint64_t seed);
  std::string name() const override { return "factorized_reduce"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override;

 private:
  std::int64_t half_;
  LayerPtr relu_, conv_even_, conv_odd_, bn_;
};

}  // namespace ppbench::cuda
