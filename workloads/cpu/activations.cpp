#include "workloads/cpu/activations.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;
}  // namespace

// GeLU's tanh form, as Eigen array expressions: Eigen evaluates tanh with its vectorised
// rational approximation for float (a scalar std::tanh per element cost these layers about a
// sixth of their time), and with std::tanh for double.
template <typename T>
Tensor<T> GeLU<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  Tensor<T> y(x.shape);
  const T c = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kGeluCubic);
  const auto v = vec(x).array();
  vec(y).array() = T(0.5) * v * (T(1) + (c * (v + a * v.cube())).tanh());
  saved.clear();
  saved.in_shape = x.shape;
  saved.t.push_back(x);
  return y;
}

template <typename T>
Tensor<T> GeLU<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  const Tensor<T>& x = saved.t.at(0);
  check(dy.data.size() == x.data.size(), "gelu: bad output gradient");
  Tensor<T> dx(x.shape);
  const T c = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kGeluCubic);
  const auto v = vec(x).array();
  // t is evaluated once into a temporary: it appears three times below.
  const Eigen::Array<T, 1, Eigen::Dynamic> t = (c * (v + a * v.cube())).tanh();
  const auto dt = (T(1) - t.square()) * c * (T(1) + T(3) * a * v.square());
  vec(dx).array() = vec(dy).array() * (T(0.5) * (T(1) + t) + T(0.5) * v * dt);
  saved.clear();
  return dx;
}

template <typename T>
Tensor<T> ReLU<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  Tensor<T> y(x.shape);
  vec(y) = vec(x).cwiseMax(T(0));
  saved.clear();
  saved.in_shape = x.shape;
  saved.t.push_back(y);
  return y;
}

template <typename T>
Tensor<T> ReLU<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  const Tensor<T>& y = saved.t.at(0);
  check(dy.data.size() == y.data.size(), "relu: bad output gradient");
  Tensor<T> dx(y.shape);
  vec(dx).array() = (vec(y).array() > T(0)).select(vec(dy).array(), T(0));
  saved.clear();
  return dx;
}

template class GeLU<float>;
template class GeLU<double>;
template class ReLU<float>;
template class ReLU<double>;

}  // namespace ppbench::cpu
