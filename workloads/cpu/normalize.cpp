#include "workloads/cpu/normalize.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

template <typename T>
Norm<T>::Norm(std::string kind, std::int64_t features, double eps, bool shift)
    : kind_(std::move(kind)), c_(features), eps_(eps), shift_(shift) {
  check(features > 0, kind_ + ": features must be positive");
  gamma.init("gamma", {features});
  std::fill(gamma.value.data.begin(), gamma.value.data.end(), T(1));
  if (shift_) beta.init("beta", {features});
}

template <typename T>
std::vector<Param<T>*> Norm<T>::params() {
  if (shift_) return {&gamma, &beta};
  return {&gamma};
}

template <typename T>
Tensor<T> Norm<T>::scale_and_save(const Tensor<T>& x, Tensor<T> xhat, Tensor<T> rstd,
                                  Saved<T>& saved) const {
  Tensor<T> y(x.shape);
  auto Xh = mat(xhat);
  if (shift_)
    mat(y) = (Xh.array().rowwise() * vec(gamma.value).array()).rowwise() + vec(beta.value).array();
  else
    mat(y) = Xh.array().rowwise() * vec(gamma.value).array();
  saved.clear();
  saved.in_shape = x.shape;
  saved.t.resize(kSlots);
  saved.t[kXhat] = std::move(xhat);
  saved.t[kRstd] = std::move(rstd);
  return y;
}

template <typename T>
void Norm<T>::reduce_param_grads(const Tensor<T>& dy, Saved<T>& saved) const {
  const Tensor<T>& xhat = saved.t[kXhat];
  check(dy.shape == xhat.shape, kind_ + ": bad output gradient");
  auto dY = mat(dy);
  Tensor<T> dgamma({c_});
  vec(dgamma) = dY.cwiseProduct(mat(xhat)).colwise().sum();
  saved.t[kDGamma] = std::move(dgamma);
  if (!shift_) return;
  Tensor<T> dbeta({c_});
  vec(dbeta) = dY.colwise().sum();
  saved.t[kDBeta] = std::move(dbeta);
}

template <typename T>
void Norm<T>::release_stats(Saved<T>& saved) {
  saved.t[kXhat].release();
  saved.t[kRstd].release();
}

template <typename T>
void Norm<T>::backward_weight(Saved<T>& saved) {
  vec(gamma.grad) += vec(saved.t[kDGamma]);
  if (shift_) vec(beta.grad) += vec(saved.t[kDBeta]);
  saved.clear();
}

template <typename T>
RowNorm<T>::RowNorm(std::string kind, std::int64_t features, double eps, bool centered)
    : Norm<T>(std::move(kind), features, eps, /*shift=*/centered), centered_(centered) {}

template <typename T>
Tensor<T> RowNorm<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  check(x.cols() == this->c_, this->kind_ + ": bad feature size");
  const std::int64_t n = x.rows();
  Tensor<T> xhat(x.shape), rstd({n});
  auto X = mat(x);
  auto Xh = mat(xhat);
  for (std::int64_t r = 0; r < n; ++r) {
    // Subtracting a mean of 0 is exact, so RMSNorm's xhat is bit for bit x * rstd.
    const T mean = centered_ ? X.row(r).mean() : T(0);
    const T var = (X.row(r).array() - mean).square().mean();
    const T rs = T(1) / std::sqrt(var + static_cast<T>(this->eps_));
    rstd.data[static_cast<std::size_t>(r)] = rs;
    Xh.row(r) = (X.row(r).array() - mean) * rs;
  }
  return this->scale_and_save(x, std::move(xhat), std::move(rstd), saved);
}

template <typename T>
Tensor<T> RowNorm<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  this->reduce_param_grads(dy, saved);
  const Tensor<T>& xhat = saved.t[this->kXhat];
  const Tensor<T>& rstd = saved.t[this->kRstd];
  Tensor<T> dx(xhat.shape);
  auto Xh = mat(xhat);
  // dxhat = dy * gamma; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)). Without
  // centring the mean(dxhat) term drops out (the mean did not depend on x), and subtracting the
  // 0 in its place is exact.
  RowMat<T> dXh = mat(dy).array().rowwise() * vec(this->gamma.value).array();
  auto dX = mat(dx);
  for (std::int64_t r = 0; r < xhat.rows(); ++r) {
    const T m1 = centered_ ? dXh.row(r).mean() : T(0);
    const T m2 = dXh.row(r).cwiseProduct(Xh.row(r)).mean();
    const T rs = rstd.data[static_cast<std::size_t>(r)];
    dX.row(r) = rs * (dXh.row(r).array() - m1 - Xh.row(r).array() * m2);
  }
  this->release_stats(saved);
  return dx;
}

template class Norm<float>;
template class Norm<double>;
template class RowNorm<float>;
template class RowNorm<double>;

}  // namespace ppbench::cpu
