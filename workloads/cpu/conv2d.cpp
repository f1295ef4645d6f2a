#include "workloads/cpu/conv2d.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"
#include "workloads/cpu/gemm.h"
#include "workloads/cpu/gemm_saved.h"

namespace ppbench::cpu {

namespace {
using namespace gemm_saved;  // the shared slot layout
}

template <typename T>
Conv2d<T>::Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kh,
                  std::int64_t kw, std::int64_t stride, std::uint64_t seed)
    : cin_(in_channels),
      cout_(out_channels),
      kh_(kh),
      kw_(kw),
      stride_(stride),
      pad_h_((kh - 1) / 2),
      pad_w_((kw - 1) / 2) {
  check(in_channels > 0 && out_channels > 0 && kh > 0 && kw > 0 && stride > 0,
        "conv2d: sizes must be positive");
  weight.init("weight", {kh * kw * in_channels, out_channels});
  const double a = 1.0 / std::sqrt(static_cast<double>(kh * kw * in_channels));
  fill_symmetric(weight.value, param_key(seed, 0), a);
}

template <typename T>
std::vector<std::int64_t> Conv2d<T>::output_shape(const std::vector<std::int64_t>& s) const {
  check(s.size() == 4 && s[3] == cin_,
        "conv2d: expects NHWC input with " + std::to_string(cin_) + " channels");
  const std::int64_t ho = (s[1] + 2 * pad_h_ - kh_) / stride_ + 1;
  const std::int64_t wo = (s[2] + 2 * pad_w_ - kw_) / stride_ + 1;
  check(ho > 0 && wo > 0, "conv2d: input smaller than the kernel");
  return {s[0], ho, wo, cout_};
}

template <typename T>
Tensor<T> Conv2d<T>::im2col(const Tensor<T>& x) const {
  const std::vector<std::int64_t> o = output_shape(x.shape);
  const std::int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), ho = o[1], wo = o[2];
  Tensor<T> cols({n * ho * wo, kh_ * kw_ * cin_});
  T* out = cols.data.data();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oy = 0; oy < ho; ++oy)
      for (std::int64_t ox = 0; ox < wo; ++ox)
        for (std::int64_t ky = 0; ky < kh_; ++ky)
          for (std::int64_t kx = 0; kx < kw_; ++kx, out += cin_) {
            const std::int64_t iy = oy * stride_ - pad_h_ + ky, ix = ox * stride_ - pad_w_ + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;  // zero padding
            const T* in = x.data.data() + ((b * h + iy) * w + ix) * cin_;
            std::copy(in, in + cin_, out);
          }
  return cols;
}

template <typename T>
void Conv2d<T>::col2im(const Tensor<T>& cols, Tensor<T>& dx) const {
  const std::vector<std::int64_t> o = output_shape(dx.shape);
  const std::int64_t n = dx.dim(0), h = dx.dim(1), w = dx.dim(2), ho = o[1], wo = o[2];
  const T* in = cols.data.data();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oy = 0; oy < ho; ++oy)
      for (std::int64_t ox = 0; ox < wo; ++ox)
        for (std::int64_t ky = 0; ky < kh_; ++ky)
          for (std::int64_t kx = 0; kx < kw_; ++kx, in += cin_) {
            const std::int64_t iy = oy * stride_ - pad_h_ + ky, ix = ox * stride_ - pad_w_ + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            T* out = dx.data.data() + ((b * h + iy) * w + ix) * cin_;
            for (std::int64_t c = 0; c < cin_; ++c) out[c] += in[c];
          }
}

template <typename T>
Tensor<T> Conv2d<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  Tensor<T> y(output_shape(x.shape));
  if (pointwise()) {
    gemm(mat(x), mat(weight.value), mat(y));
  } else {
    gemm(mat(im2col(x)), mat(weight.value), mat(y));
  }
  keep_input(saved, x);
  return y;
}

template <typename T>
Tensor<T> Conv2d<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  check(dy.shape == output_shape(saved.in_shape), "conv2d: bad output gradient");
  Tensor<T> dx(saved.in_shape);
  if (pointwise()) {
    gemm(mat(dy), transposed(mat(weight.value)), mat(dx));
  } else {
    Tensor<T> dcols({dy.rows(), kh_ * kw_ * cin_});
    gemm(mat(dy), transposed(mat(weight.value)), mat(dcols));
    col2im(dcols, dx);
  }
  saved.t[kDY] = dy;
  return dx;
}

template <typename T>
void Conv2d<T>::backward_weight(Saved<T>& saved) {
  const Tensor<T>& x = saved.t[kX];
  const Tensor<T>& dy = saved.t[kDY];
  if (pointwise()) {
    gemm(transposed(mat(x)), mat(dy), mat(weight.grad), Gemm::kAccumulate);
  } else {
    gemm(transposed(mat(im2col(x))), mat(dy), mat(weight.grad), Gemm::kAccumulate);
  }
  saved.clear();
}

template class Conv2d<float>;
template class Conv2d<double>;

}  // namespace ppbench::cpu
