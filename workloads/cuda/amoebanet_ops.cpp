#include "workloads/cuda/amoebanet_ops.h"

#include <array>
#include <initializer_list>

#include "workloads/cpu/tensor.h"
#include "workloads/cuda/activations.h"
#include "workloads/cuda/batchnorm.h"
#include "workloads/cuda/blocks.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/conv2d.h"
#include "workloads/cuda/pool.h"

namespace ppbench::cuda {

LayerPtr make_relu_conv_bn(DeviceArena& params, std::int64_t cin, std::int64_t cout,
                           std::int64_t kh, std::int64_t kw, std::int64_t stride, DType dtype,
                           std::uint64_t seed) {
  auto s = std::make_unique<Sequential>("relu_conv_bn");
  s->add(std::make_unique<ReLU>());
  s->add(std::make_unique<Conv2d>(params, cin, cout, kh, kw, stride, dtype, seed));
  s->add(std::make_unique<BatchNorm>(params, cout, dtype));
  return s;
}

LayerPtr make_amoeba_op(DeviceArena& params, AmoebaOp op, std::int64_t c, std::int64_t stride,
                        DType dtype, std::uint64_t seed) {
  require(stride == 1 || stride == 2, "amoebanet op: stride must be 1 or 2");
  require(c % 4 == 0, "amoebanet op: channels must be a multiple of 4 (bottleneck c/4)");
  const std::int64_t q = c / 4;
  // The CPU's seeds: chain element k gets derive_seed(seed, k).
  auto chain = [&](std::initializer_list<std::array<std::int64_t, 5>> convs) {
    auto s = std::make_unique<Sequential>(std::string(cpu::amoeba_op_name(op)));
    std::uint64_t k = 0;
    for (const auto& [cin, cout, kh, kw, st] : convs)
      s->add(make_relu_conv_bn(params, cin, cout, kh, kw, st, dtype, cpu::derive_seed(seed, k++)));
    return LayerPtr(std::move(s));
  };
  switch (op) {
    case AmoebaOp::kConv1x1:
      return make_relu_conv_bn(params, c, c, 1, 1, stride, dtype, seed);
    case AmoebaOp::kConv3x3:
      return chain({{c, q, 1, 1, 1}, {q, q, 3, 3, stride}, {q, c, 1, 1, 1}});
    case AmoebaOp::kConv1x7_7x1:
      require(stride == 1, "amoebanet op: a strided conv1x7-7x1 is not supported");
      return chain({{c, q, 1, 1, 1}, {q, q, 1, 7, 1}, {q, q, 7, 1, 1}, {q, c, 1, 1, 1}});
    case AmoebaOp::kMaxPool3x3:
      return std::make_unique<MaxPool2d>(3, stride, 1);
    case AmoebaOp::kMaxPool2x2:
      require(stride == 2, "amoebanet op: max-pool 2x2 is only used with stride 2");
      return std::make_unique<MaxPool2d>(2, 2, 0);
    case AmoebaOp::kAvgPool3x3:
      return std::make_unique<AvgPool2d>(3, stride, 1);
    case AmoebaOp::kNone:
      require(stride == 1,
              "amoebanet op: the strided 'none' (factorized reduce) has no GPU "
              "version yet");
      return std::make_unique<Identity>();
  }
  require(false, "amoebanet op: unknown op");
  return nullptr;
}

}  // namespace ppbench::cuda
