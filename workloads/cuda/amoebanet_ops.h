// AmoebaNet-D's ops on the GPU, as workloads/cpu/amoebanet_ops.h, built from the GPU kernels
// with the CPU's seeds so both backends hold the same parameters:
//   conv1x1      ReLU-1x1 conv-BN, c -> c
//   conv3x3      ReLU-conv-BN three times: 1x1 c -> c/4, 3x3 (strided), 1x1 back to c
//   conv1x7-7x1  ReLU-conv-BN four times: 1x1 c -> c/4, 1x7, 7x1, 1x1 back to c
//   max-pool 3x3 (pad 1), max-pool 2x2 (pad 0), avg-pool 3x3 (pad 1, padding not counted)
//   none         identity at stride 1
// Not yet here: the strided "none" (FactorizedReduce) and the cells; make_amoeba_op rejects the
// former with an error rather than building something that differs from the CPU.
#pragma once

#include "workloads/cpu/amoebanet_ops.h"
#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

using cpu::AmoebaOp;

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
    saved.clear();
    return dy;
  }
};

}  // namespace ppbench::cuda
