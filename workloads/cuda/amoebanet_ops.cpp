#include "workloads/cuda/amoebanet_ops.h"

#include <array>
#include <initializer_list>

#include "workloads/counter_rng.h"
#include "workloads/cuda/activations.h"
#include "workloads/cuda/batchnorm.h"
#include "workloads/cuda/blocks.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/concat.h"
#include "workloads/cuda/conv2d.h"
#include "workloads/cuda/pick_pixels.h"
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
    auto s = std::make_unique<Sequential>(std::string(amoeba_op_name(op)));
    std::uint64_t k = 0;
    for (const auto& [cin, cout, kh, kw, st] : convs)
      s->add(make_relu_conv_bn(params, cin, cout, kh, kw, st, dtype, derive_seed(seed, k++)));
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
      if (stride == 1) return std::make_unique<Identity>();
      return std::make_unique<FactorizedReduce>(params, c, c, dtype, seed);
  }
  require(false, "amoebanet op: unknown op");
  return nullptr;
}

namespace {

enum FactorizedReduceSub { kRelu, kConvEven, kConvOdd, kBn, kSubs };

// Checked before any parameter is allocated, so a bad size leaves the arena as it was.
std::int64_t half_of(std::int64_t cout) {
  require(cout > 0 && cout % 2 == 0, "factorized reduce: output channels must be even");
  return cout / 2;
}

}  // namespace

FactorizedReduce::FactorizedReduce(DeviceArena& params, std::int64_t cin, std::int64_t cout,
                                   DType dtype, std::uint64_t seed)
    : half_(half_of(cout)),
      relu_(std::make_unique<ReLU>()),
      conv_even_(
          std::make_unique<Conv2d>(params, cin, half_, 1, 1, 1, dtype, derive_seed(seed, 0))),
      conv_odd_(std::make_unique<Conv2d>(params, cin, half_, 1, 1, 1, dtype, derive_seed(seed, 1))),
      bn_(std::make_unique<BatchNorm>(params, cout, dtype)) {}

DTensor FactorizedReduce::forward(Context& ctx, const DTensor& x, Saved& saved) {
  require(x.shape().size() == 4,
          "factorized reduce: expects NHWC input, got " + shape_text(x.shape()));
  saved.clear();
  saved.in_shape = x.shape();
  saved.sub.resize(kSubs);
  const DTensor r = relu_->forward(ctx, x, saved.sub[kRelu]);
  const DTensor even = conv_even_->forward(ctx, pick_pixels(ctx, r, 0), saved.sub[kConvEven]);
  const DTensor odd = conv_odd_->forward(ctx, pick_pixels(ctx, r, 1), saved.sub[kConvOdd]);
  return bn_->forward(ctx, concat_channels(ctx, {&even, &odd}), saved.sub[kBn]);
}

DTensor FactorizedReduce::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  require(saved.sub.size() == kSubs, "factorized reduce: backward without forward");
  const std::vector<DTensor> d =
      split_channels(ctx, bn_->backward_input(ctx, dy, saved.sub[kBn]), {half_, half_});
  const DTensor d_even = conv_even_->backward_input(ctx, d[0], saved.sub[kConvEven]);
  const DTensor d_odd = conv_odd_->backward_input(ctx, d[1], saved.sub[kConvOdd]);
  return relu_->backward_input(ctx, unpick_pixels(ctx, d_even, d_odd, saved.in_shape),
                               saved.sub[kRelu]);
}

void FactorizedReduce::backward_weight(Context& ctx, Saved& saved) {
  conv_even_->backward_weight(ctx, saved.sub[kConvEven]);
  conv_odd_->backward_weight(ctx, saved.sub[kConvOdd]);
  bn_->backward_weight(ctx, saved.sub[kBn]);
  saved.clear();
}

std::vector<Param*> FactorizedReduce::params() {
  std::vector<Param*> all;
  for (Layer* l : {conv_even_.get(), conv_odd_.get(), bn_.get()})
    for (Param* p : l->params()) all.push_back(p);
  return all;
}

}  // namespace ppbench::cuda
