#include "workloads/cpu/batchnorm.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

namespace {
enum Slot { kXhat, kRstd, kDGamma, kDBeta, kSlots };
}

template <typename T>
BatchNorm<T>::BatchNorm(std::int64_t channels, double eps) : c_(channels), eps_(eps) {
  check(channels > 0, "batchnorm: channels must be positive");
  gamma.init("gamma", {channels});
  beta.init("beta", {channels});
  std::fill(gamma.value.data.begin(), gamma.value.data.end(), T(1));
}

template <typename T>
Tensor<T> BatchNorm<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  check(x.cols() == c_, "batchnorm: bad channel count");
  check(x.rows() > 1, "batchnorm: needs more than one value per channel");
  Tensor<T> xhat(x.shape), rstd({c_}), y(x.shape);
  auto X = mat(x);
  const RowVec<T> mean = X.colwise().mean();
  auto Xh = mat(xhat);
  Xh = X.rowwise() - mean;
  const RowVec<T> var = Xh.array().square().colwise().mean();
  vec(rstd) = (var.array() + static_cast<T>(eps_)).rsqrt();
  Xh.array().rowwise() *= vec(rstd).array();
  mat(y) = (Xh.array().rowwise() * vec(gamma.value).array()).rowwise() + vec(beta.value).array();
  saved.clear();
  saved.in_shape = x.shape;
  saved.t.resize(kSlots);
  saved.t[kXhat] = std::move(xhat);
  saved.t[kRstd] = std::move(rstd);
  return y;
}

template <typename T>
Tensor<T> BatchNorm<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  Tensor<T>& xhat = saved.t[kXhat];
  check(dy.shape == xhat.shape, "batchnorm: bad output gradient");
  auto Xh = mat(xhat);
  auto dY = mat(dy);
  Tensor<T> dgamma({c_}), dbeta({c_}), dx(xhat.shape);
  vec(dgamma) = dY.cwiseProduct(Xh).colwise().sum();
  vec(dbeta) = dY.colwise().sum();
  // dx = gamma * rstd / M * (M dy - dbeta - xhat * dgamma), M = N*H*W.
  const T m = static_cast<T>(xhat.rows());
  const RowVec<T> scale = (vec(gamma.value).array() * vec(saved.t[kRstd]).array() / m).matrix();
  mat(dx) =
      ((m * dY.array()).rowwise() - vec(dbeta).array() - Xh.array().rowwise() * vec(dgamma).array())
          .rowwise() *
      scale.array();
  saved.t[kDGamma] = std::move(dgamma);
  saved.t[kDBeta] = std::move(dbeta);
  saved.t[kXhat].release();
  saved.t[kRstd].release();
  return dx;
}

template <typename T>
void BatchNorm<T>::backward_weight(Saved<T>& saved) {
  vec(gamma.grad) += vec(saved.t[kDGamma]);
  vec(beta.grad) += vec(saved.t[kDBeta]);
  saved.clear();
}

template class BatchNorm<float>;
template class BatchNorm<double>;

}  // namespace ppbench::cpu
