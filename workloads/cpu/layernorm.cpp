#include "workloads/cpu/layernorm.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

namespace {
enum Slot { kXhat, kRstd, kDGamma, kDBeta, kSlots };
}

template <typename T>
LayerNorm<T>::LayerNorm(std::int64_t features, double eps) : c_(features), eps_(eps) {
  check(features > 0, "layernorm: features must be positive");
  gamma.init("gamma", {features});
  beta.init("beta", {features});
  std::fill(gamma.value.data.begin(), gamma.value.data.end(), T(1));
}

template <typename T>
Tensor<T> LayerNorm<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  check(x.cols() == c_, "layernorm: bad feature size");
  const std::int64_t n = x.rows();
  Tensor<T> xhat(x.shape), rstd({n}), y(x.shape);
  auto X = mat(x);
  auto Xh = mat(xhat);
  for (std::int64_t r = 0; r < n; ++r) {
    const T mean = X.row(r).mean();
    const T var = (X.row(r).array() - mean).square().mean();
    const T rs = T(1) / std::sqrt(var + static_cast<T>(eps_));
    rstd.data[static_cast<std::size_t>(r)] = rs;
    Xh.row(r) = (X.row(r).array() - mean) * rs;
  }
  mat(y) = (Xh.array().rowwise() * vec(gamma.value).array()).rowwise() + vec(beta.value).array();
  saved.clear();
  saved.in_shape = x.shape;
  saved.t.resize(kSlots);
  saved.t[kXhat] = std::move(xhat);
  saved.t[kRstd] = std::move(rstd);
  return y;
}

template <typename T>
Tensor<T> LayerNorm<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  Tensor<T>& xhat = saved.t[kXhat];
  check(dy.shape == xhat.shape, "layernorm: bad output gradient");
  const std::int64_t n = xhat.rows();
  Tensor<T> dx(xhat.shape);
  auto Xh = mat(xhat);
  auto dY = mat(dy);
  // dxhat = dy * gamma; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
  RowMat<T> dXh = dY.array().rowwise() * vec(gamma.value).array();
  auto dX = mat(dx);
  for (std::int64_t r = 0; r < n; ++r) {
    const T m1 = dXh.row(r).mean();
    const T m2 = dXh.row(r).cwiseProduct(Xh.row(r)).mean();
    const T rs = saved.t[kRstd].data[static_cast<std::size_t>(r)];
    dX.row(r) = rs * (dXh.row(r).array() - m1 - Xh.row(r).array() * m2);
  }
  Tensor<T> dgamma({c_}), dbeta({c_});
  vec(dgamma) = dY.cwiseProduct(Xh).colwise().sum();
  vec(dbeta) = dY.colwise().sum();
  saved.t[kDGamma] = std::move(dgamma);
  saved.t[kDBeta] = std::move(dbeta);
  saved.t[kXhat].release();
  saved.t[kRstd].release();
  return dx;
}

template <typename T>
void LayerNorm<T>::backward_weight(Saved<T>& saved) {
  vec(gamma.grad) += vec(saved.t[kDGamma]);
  vec(beta.grad) += vec(saved.t[kDBeta]);
  saved.clear();
}

template class LayerNorm<float>;
template class LayerNorm<double>;

}  // namespace ppbench::cpu
