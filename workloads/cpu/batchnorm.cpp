#include "workloads/cpu/batchnorm.h"

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

template <typename T>
BatchNorm<T>::BatchNorm(std::int64_t channels, double eps)
    : Norm<T>("batchnorm", channels, eps, /*shift=*/true) {}

template <typename T>
Tensor<T> BatchNorm<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  check(x.cols() == this->c_, "batchnorm: bad channel count");
  check(x.rows() > 1, "batchnorm: needs more than one value per channel");
  Tensor<T> xhat(x.shape), rstd({this->c_});
  auto X = mat(x);
  const RowVec<T> mean = X.colwise().mean();
  auto Xh = mat(xhat);
  Xh = X.rowwise() - mean;
  const RowVec<T> var = Xh.array().square().colwise().mean();
  vec(rstd) = (var.array() + static_cast<T>(this->eps_)).rsqrt();
  Xh.array().rowwise() *= vec(rstd).array();
  return this->scale_and_save(x, std::move(xhat), std::move(rstd), saved);
}

template <typename T>
Tensor<T> BatchNorm<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  this->reduce_param_grads(dy, saved);
  const Tensor<T>& xhat = saved.t[this->kXhat];
  auto Xh = mat(xhat);
  auto dgamma = vec(saved.t[this->kDGamma]);
  auto dbeta = vec(saved.t[this->kDBeta]);
  Tensor<T> dx(xhat.shape);
  // The row formula (RowNorm) down the columns, with the column sums already at hand as dgamma
  // and dbeta: dx = gamma * rstd / M * (M dy - dbeta - xhat * dgamma), M = N*H*W.
  const T m = static_cast<T>(xhat.rows());
  const RowVec<T> scale =
      (vec(this->gamma.value).array() * vec(saved.t[this->kRstd]).array() / m).matrix();
  mat(dx) =
      ((m * mat(dy).array()).rowwise() - dbeta.array() - Xh.array().rowwise() * dgamma.array())
          .rowwise() *
      scale.array();
  this->release_stats(saved);
  return dx;
}

template class BatchNorm<float>;
template class BatchNorm<double>;

}  // namespace ppbench::cpu
