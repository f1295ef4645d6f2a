#include "workloads/cpu/pool.h"

#include <cmath>
#include <limits>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

namespace {

struct Geometry {
  std::int64_t n, h, w, c, ho, wo;
};

Geometry geometry(const std::vector<std::int64_t>& s, std::int64_t k, std::int64_t stride,
                  std::int64_t pad, const char* what) {
  check(s.size() == 4, std::string(what) + ": expects NHWC input");
  check(k > 0 && stride > 0 && pad >= 0 && pad < k, std::string(what) + ": bad window");
  Geometry g{
      s[0], s[1], s[2], s[3], (s[1] + 2 * pad - k) / stride + 1, (s[2] + 2 * pad - k) / stride + 1};
  check(g.ho > 0 && g.wo > 0, std::string(what) + ": input smaller than the window");
  return g;
}

}  // namespace

template <typename T>
MaxPool2d<T>::MaxPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t pad)
    : k_(kernel), stride_(stride), pad_(pad) {}

template <typename T>
Tensor<T> MaxPool2d<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  const Geometry g = geometry(x.shape, k_, stride_, pad_, "maxpool");
  Tensor<T> y({g.n, g.ho, g.wo, g.c}), arg(y.shape);
  for (std::int64_t b = 0; b < g.n; ++b)
    for (std::int64_t oy = 0; oy < g.ho; ++oy)
      for (std::int64_t ox = 0; ox < g.wo; ++ox)
        for (std::int64_t ch = 0; ch < g.c; ++ch) {
          // The first in-image position to start, and NaN wins (as in PyTorch): a window of
          // NaN must still name a position inside the image, or its backward writes outside.
          T best = -std::numeric_limits<T>::infinity();
          std::int64_t best_at = -1;
          for (std::int64_t ky = 0; ky < k_; ++ky)
            for (std::int64_t kx = 0; kx < k_; ++kx) {
              const std::int64_t iy = oy * stride_ - pad_ + ky, ix = ox * stride_ - pad_ + kx;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              const T v = x.data[static_cast<std::size_t>(((b * g.h + iy) * g.w + ix) * g.c + ch)];
              if (best_at < 0 || v > best || (std::isnan(v) && !std::isnan(best)))
                best = v, best_at = ky * k_ + kx;
            }
          const auto o = static_cast<std::size_t>(((b * g.ho + oy) * g.wo + ox) * g.c + ch);
          y.data[o] = best;
          arg.data[o] = static_cast<T>(best_at);
        }
  saved.clear();
  saved.in_shape = x.shape;
  saved.t.push_back(std::move(arg));
  return y;
}

template <typename T>
Tensor<T> MaxPool2d<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  const Geometry g = geometry(saved.in_shape, k_, stride_, pad_, "maxpool");
  const Tensor<T>& arg = saved.t.at(0);
  check(dy.shape == arg.shape, "maxpool: bad output gradient");
  Tensor<T> dx(saved.in_shape);
  for (std::int64_t b = 0; b < g.n; ++b)
    for (std::int64_t oy = 0; oy < g.ho; ++oy)
      for (std::int64_t ox = 0; ox < g.wo; ++ox)
        for (std::int64_t ch = 0; ch < g.c; ++ch) {
          const auto o = static_cast<std::size_t>(((b * g.ho + oy) * g.wo + ox) * g.c + ch);
          const auto at = static_cast<std::int64_t>(arg.data[o]);
          const std::int64_t iy = oy * stride_ - pad_ + at / k_;
          const std::int64_t ix = ox * stride_ - pad_ + at % k_;
          dx.data[static_cast<std::size_t>(((b * g.h + iy) * g.w + ix) * g.c + ch)] += dy.data[o];
        }
  saved.clear();
  return dx;
}

template <typename T>
AvgPool2d<T>::AvgPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t pad)
    : k_(kernel), stride_(stride), pad_(pad) {}

// Forward and backward visit the same windows; `backward` scatters instead of gathering.
template <typename T>
static void avg_pool(const Geometry& g, std::int64_t k, std::int64_t stride, std::int64_t pad, T* x,
                     T* y, bool backward) {
  for (std::int64_t b = 0; b < g.n; ++b)
    for (std::int64_t oy = 0; oy < g.ho; ++oy)
      for (std::int64_t ox = 0; ox < g.wo; ++ox) {
        const std::int64_t y0 = std::max<std::int64_t>(oy * stride - pad, 0);
        const std::int64_t y1 = std::min<std::int64_t>(oy * stride - pad + k, g.h);
        const std::int64_t x0 = std::max<std::int64_t>(ox * stride - pad, 0);
        const std::int64_t x1 = std::min<std::int64_t>(ox * stride - pad + k, g.w);
        const T inv = T(1) / static_cast<T>((y1 - y0) * (x1 - x0));
        T* out = y + ((b * g.ho + oy) * g.wo + ox) * g.c;
        for (std::int64_t iy = y0; iy < y1; ++iy)
          for (std::int64_t ix = x0; ix < x1; ++ix) {
            T* in = x + ((b * g.h + iy) * g.w + ix) * g.c;
            for (std::int64_t ch = 0; ch < g.c; ++ch) {
              if (backward) {
                in[ch] += out[ch] * inv;
              } else {
                out[ch] += in[ch] * inv;
              }
            }
          }
      }
}

template <typename T>
Tensor<T> AvgPool2d<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  const Geometry g = geometry(x.shape, k_, stride_, pad_, "avgpool");
  Tensor<T> y({g.n, g.ho, g.wo, g.c});
  avg_pool(g, k_, stride_, pad_, const_cast<T*>(x.data.data()), y.data.data(), false);
  saved.clear();
  saved.in_shape = x.shape;
  return y;
}

template <typename T>
Tensor<T> AvgPool2d<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  const Geometry g = geometry(saved.in_shape, k_, stride_, pad_, "avgpool");
  check(dy.numel() == g.n * g.ho * g.wo * g.c, "avgpool: bad output gradient");
  Tensor<T> dx(saved.in_shape);
  avg_pool(g, k_, stride_, pad_, dx.data.data(), const_cast<T*>(dy.data.data()), true);
  saved.clear();
  return dx;
}

template <typename T>
Tensor<T> GlobalAvgPool<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  check(x.shape.size() == 4, "global_avgpool: expects NHWC input");
  const std::int64_t n = x.dim(0), hw = x.dim(1) * x.dim(2), c = x.dim(3);
  Tensor<T> y({n, c});
  for (std::int64_t b = 0; b < n; ++b) {
    mat(y).row(b) = ConstMatMap<T>(x.data.data() + b * hw * c, hw, c).colwise().mean();
  }
  saved.clear();
  saved.in_shape = x.shape;
  return y;
}

template <typename T>
Tensor<T> GlobalAvgPool<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  const std::vector<std::int64_t>& s = saved.in_shape;
  const std::int64_t n = s[0], hw = s[1] * s[2], c = s[3];
  check(dy.numel() == n * c, "global_avgpool: bad output gradient");
  Tensor<T> dx(s);
  for (std::int64_t b = 0; b < n; ++b) {
    MatMap<T>(dx.data.data() + b * hw * c, hw, c).rowwise() = mat(dy).row(b) / static_cast<T>(hw);
  }
  saved.clear();
  return dx;
}

template class MaxPool2d<float>;
template class MaxPool2d<double>;
template class AvgPool2d<float>;
template class AvgPool2d<double>;
template class GlobalAvgPool<float>;
template class GlobalAvgPool<double>;

}  // namespace ppbench::cpu
