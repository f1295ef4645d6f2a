// AmoebaNet-D's op library (docs/papers.md), as Layer<T>s built from the basic kernels:
//   conv1x1      ReLU-1x1 conv-BN, c -> c
//   conv3x3      ReLU-conv-BN three times: 1x1 c -> c/4, 3x3 (strided), 1x1 back to c
//   conv1x7-7x1  ReLU-conv-BN four times: 1x1 c -> c/4, 1x7, 7x1, 1x1 back to c
//   max-pool 3x3 (pad 1), max-pool 2x2 (pad 0), avg-pool 3x3 (pad 1, padding not counted)
//   none         identity; at stride 2 a factorized reduce c -> c
// Convolutions have no bias; BatchNorm uses per-micro-batch statistics (batchnorm.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "workloads/amoebanet_genotype.h"
#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

using ::ppbench::amoeba_op_name;
using ::ppbench::AmoebaOp;

// ReLU -> conv (kh x kw, stride, "same" padding, no bias) -> BatchNorm, as a Sequential whose
// Saved.sub is {relu, conv, bn}.
template <typename T>
LayerPtr<T> make_relu_conv_bn(std::int64_t cin, std::int64_t cout, std::int64_t kh, std::int64_t kw,
                              std::int64_t stride, std::uint64_t seed);

// One op of the genotype on `channels` channels. Stride 2 is what the reduction cell applies to
// its two inputs. A strided conv1x7-7x1 would need a different stride per axis (1x7 along
// columns, 7x1 along rows), which Conv2d does not have; AmoebaNet-D never asks for it (the
// reduction cell applies it to state 2), so it is rejected.
template <typename T>
LayerPtr<T> make_amoeba_op(AmoebaOp op, std::int64_t channels, std::int64_t stride,
                           std::uint64_t seed);

// y = x. Keeps nothing.
template <typename T>
class Identity final : public Layer<T> {
 public:
  std::string name() const override { return "identity"; }
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
};

// Halves the spatial size of a skip input without losing every other pixel: ReLU, then two 1x1
// stride-2 convs to cout/2 channels each, the first on the even pixels (0, 0), (0, 2) ...,
// the second on the input shifted by one pixel (1, 1), (1, 3) ... (zero past the border, as the
// reference pads the shifted input), concatenated, BatchNorm. Output ceil(H/2) x ceil(W/2).
//
// A 1x1 stride-2 conv is a pointwise GEMM on the picked pixels, so the convs run on the two
// quarter-size subsamples and keep only those for W (half the ReLU output in all), not the
// full-size input. Saved.sub = {relu, conv_even, conv_odd, bn}.
template <typename T>
class FactorizedReduce final : public Layer<T> {
 public:
  FactorizedReduce(std::int64_t cin, std::int64_t cout, std::uint64_t seed);
  std::string name() const override { return "factorized_reduce"; }
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override;

 private:
  std::int64_t half_;
  LayerPtr<T> relu_, conv_even_, conv_odd_, bn_;
};

}  // namespace ppbench::cpu
