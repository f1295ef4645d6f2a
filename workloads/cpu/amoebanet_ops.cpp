#include "workloads/cpu/amoebanet_ops.h"

#include <array>
#include <initializer_list>

#include "workloads/cpu/activations.h"
#include "workloads/cpu/batchnorm.h"
#include "workloads/cpu/blocks.h"
#include "workloads/cpu/concat.h"
#include "workloads/cpu/conv2d.h"
#include "workloads/cpu/eigen_util.h"
#include "workloads/cpu/pool.h"

namespace ppbench::cpu {

template <typename T>
LayerPtr<T> make_relu_conv_bn(std::int64_t cin, std::int64_t cout, std::int64_t kh, std::int64_t kw,
                              std::int64_t stride, std::uint64_t seed) {
  auto s = std::make_unique<Sequential<T>>("relu_conv_bn");
  s->add(std::make_unique<ReLU<T>>());
  s->add(std::make_unique<Conv2d<T>>(cin, cout, kh, kw, stride, seed));
  s->add(std::make_unique<BatchNorm<T>>(cout));
  return s;
}

template <typename T>
LayerPtr<T> make_amoeba_op(AmoebaOp op, std::int64_t c, std::int64_t stride, std::uint64_t seed) {
  check(stride == 1 || stride == 2, "amoebanet op: stride must be 1 or 2");
  check(c % 4 == 0, "amoebanet op: channels must be a multiple of 4 (bottleneck c/4)");
  const std::int64_t q = c / 4;
  auto chain = [&](std::initializer_list<std::array<std::int64_t, 5>> convs) {
    auto s = std::make_unique<Sequential<T>>(std::string(amoeba_op_name(op)));
    std::uint64_t k = 0;
    for (const auto& [cin, cout, kh, kw, st] : convs)
      s->add(make_relu_conv_bn<T>(cin, cout, kh, kw, st, derive_seed(seed, k++)));
    return LayerPtr<T>(std::move(s));
  };
  switch (op) {
    case AmoebaOp::kConv1x1:
      return make_relu_conv_bn<T>(c, c, 1, 1, stride, seed);
    case AmoebaOp::kConv3x3:
      return chain({{c, q, 1, 1, 1}, {q, q, 3, 3, stride}, {q, c, 1, 1, 1}});
    case AmoebaOp::kConv1x7_7x1:
      check(stride == 1, "amoebanet op: a strided conv1x7-7x1 is not supported");
      return chain({{c, q, 1, 1, 1}, {q, q, 1, 7, 1}, {q, q, 7, 1, 1}, {q, c, 1, 1, 1}});
    case AmoebaOp::kMaxPool3x3:
      return std::make_unique<MaxPool2d<T>>(3, stride, 1);
    case AmoebaOp::kMaxPool2x2:
      // A 2x2 window without padding only keeps the size at stride 2 (halving it).
      check(stride == 2, "amoebanet op: max-pool 2x2 is only used with stride 2");
      return std::make_unique<MaxPool2d<T>>(2, 2, 0);
    case AmoebaOp::kAvgPool3x3:
      return std::make_unique<AvgPool2d<T>>(3, stride, 1);
    case AmoebaOp::kNone:
      if (stride == 1) return std::make_unique<Identity<T>>();
      return std::make_unique<FactorizedReduce<T>>(c, c, seed);
  }
  check(false, "amoebanet op: unknown op");
  return nullptr;
}

template <typename T>
Tensor<T> Identity<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  saved.clear();
  saved.in_shape = x.shape;
  return x;
}

template <typename T>
Tensor<T> Identity<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  check(dy.shape == saved.in_shape, "identity: bad output gradient");
  saved.clear();
  return dy;
}

namespace {

enum Sub { kRelu, kConvEven, kConvOdd, kBn, kSubs };

// Pixels (2i + offset, 2j + offset) of an NHWC tensor; zero where that lies past the border.
template <typename T>
Tensor<T> pick_pixels(const Tensor<T>& x, std::int64_t offset) {
  const std::int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const std::int64_t ho = (h + 1) / 2, wo = (w + 1) / 2;
  Tensor<T> y({n, ho, wo, c});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0, iy = offset; i < ho && iy < h; ++i, iy += 2)
      for (std::int64_t j = 0, ix = offset; j < wo && ix < w; ++j, ix += 2) {
        const T* in = x.data.data() + ((b * h + iy) * w + ix) * c;
        std::copy(in, in + c, y.data.data() + ((b * ho + i) * wo + j) * c);
      }
  return y;
}

// The backward of pick_pixels: adds dy into the picked pixels of dx.
template <typename T>
void scatter_pixels(const Tensor<T>& dy, std::int64_t offset, Tensor<T>& dx) {
  const std::int64_t n = dx.dim(0), h = dx.dim(1), w = dx.dim(2), c = dx.dim(3);
  const std::int64_t ho = dy.dim(1), wo = dy.dim(2);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0, iy = offset; i < ho && iy < h; ++i, iy += 2)
      for (std::int64_t j = 0, ix = offset; j < wo && ix < w; ++j, ix += 2) {
        const T* g = dy.data.data() + ((b * ho + i) * wo + j) * c;
        T* out = dx.data.data() + ((b * h + iy) * w + ix) * c;
        for (std::int64_t k = 0; k < c; ++k) out[k] += g[k];
      }
}

}  // namespace

template <typename T>
FactorizedReduce<T>::FactorizedReduce(std::int64_t cin, std::int64_t cout, std::uint64_t seed)
    : half_(cout / 2),
      relu_(std::make_unique<ReLU<T>>()),
      conv_even_(std::make_unique<Conv2d<T>>(cin, cout / 2, 1, 1, 1, derive_seed(seed, 0))),
      conv_odd_(std::make_unique<Conv2d<T>>(cin, cout / 2, 1, 1, 1, derive_seed(seed, 1))),
      bn_(std::make_unique<BatchNorm<T>>(cout)) {
  check(cout % 2 == 0, "factorized reduce: output channels must be even");
}

template <typename T>
Tensor<T> FactorizedReduce<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  check(x.shape.size() == 4, "factorized reduce: expects NHWC input");
  saved.clear();
  saved.in_shape = x.shape;
  saved.sub.resize(kSubs);
  const Tensor<T> r = relu_->forward(x, saved.sub[kRelu]);
  const Tensor<T> even = conv_even_->forward(pick_pixels(r, 0), saved.sub[kConvEven]);
  const Tensor<T> odd = conv_odd_->forward(pick_pixels(r, 1), saved.sub[kConvOdd]);
  return bn_->forward(concat_channels<T>({&even, &odd}), saved.sub[kBn]);
}

template <typename T>
Tensor<T> FactorizedReduce<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  const std::vector<Tensor<T>> d =
      split_channels(bn_->backward_input(dy, saved.sub[kBn]), {half_, half_});
  Tensor<T> dr(saved.in_shape);
  scatter_pixels(conv_even_->backward_input(d[0], saved.sub[kConvEven]), 0, dr);
  scatter_pixels(conv_odd_->backward_input(d[1], saved.sub[kConvOdd]), 1, dr);
  return relu_->backward_input(dr, saved.sub[kRelu]);
}

template <typename T>
void FactorizedReduce<T>::backward_weight(Saved<T>& saved) {
  conv_even_->backward_weight(saved.sub[kConvEven]);
  conv_odd_->backward_weight(saved.sub[kConvOdd]);
  bn_->backward_weight(saved.sub[kBn]);
  saved.clear();
}

template <typename T>
std::vector<Param<T>*> FactorizedReduce<T>::params() {
  std::vector<Param<T>*> all;
  for (Layer<T>* l : {conv_even_.get(), conv_odd_.get(), bn_.get()})
    for (Param<T>* p : l->params()) all.push_back(p);
  return all;
}

template LayerPtr<float> make_relu_conv_bn<float>(std::int64_t, std::int64_t, std::int64_t,
                                                  std::int64_t, std::int64_t, std::uint64_t);
template LayerPtr<double> make_relu_conv_bn<double>(std::int64_t, std::int64_t, std::int64_t,
                                                    std::int64_t, std::int64_t, std::uint64_t);
template LayerPtr<float> make_amoeba_op<float>(AmoebaOp, std::int64_t, std::int64_t, std::uint64_t);
template LayerPtr<double> make_amoeba_op<double>(AmoebaOp, std::int64_t, std::int64_t,
                                                 std::uint64_t);
template class Identity<float>;
template class Identity<double>;
template class FactorizedReduce<float>;
template class FactorizedReduce<double>;

}  // namespace ppbench::cpu
