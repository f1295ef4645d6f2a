#include "workloads/cpu/activations.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;
}  // namespace

template <typename T>
Tensor<T> GeLU<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  Tensor<T> y(x.shape);
  const T c = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kGeluCubic);
  for (std::size_t i = 0; i < x.data.size(); ++i) {
    const T v = x.data[i];
    y.data[i] = T(0.5) * v * (T(1) + std::tanh(c * (v + a * v * v * v)));
  }
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
  for (std::size_t i = 0; i < x.data.size(); ++i) {
    const T v = x.data[i];
    const T t = std::tanh(c * (v + a * v * v * v));
    const T dt = (T(1) - t * t) * c * (T(1) + T(3) * a * v * v);
    dx.data[i] = dy.data[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * dt);
  }
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
  for (std::size_t i = 0; i < y.data.size(); ++i) dx.data[i] = y.data[i] > T(0) ? dy.data[i] : T(0);
  saved.clear();
  return dx;
}

template class GeLU<float>;
template class GeLU<double>;
template class ReLU<float>;
template class ReLU<double>;

}  // namespace ppbench::cpu
