#include "workloads/cpu/linear.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"
#include "workloads/cpu/gemm.h"
#include "workloads/cpu/gemm_saved.h"

namespace ppbench::cpu {

namespace {
using namespace gemm_saved;  // the shared slot layout
}

template <typename T>
Linear<T>::Linear(std::int64_t in, std::int64_t out, bool with_bias, std::uint64_t seed)
    : in_(in), out_(out), has_bias_(with_bias) {
  check(in > 0 && out > 0, "linear: sizes must be positive");
  const double a = 1.0 / std::sqrt(static_cast<double>(in));
  weight.init("weight", {in, out});
  fill_symmetric(weight.value, param_key(seed, 0), a);
  if (has_bias_) {
    bias.init("bias", {out});
    fill_symmetric(bias.value, param_key(seed, 1), a);
  }
}

template <typename T>
Tensor<T> Linear<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  check(x.cols() == in_,
        "linear: input features " + std::to_string(x.cols()) + " != " + std::to_string(in_));
  std::vector<std::int64_t> shape = x.shape;
  shape.back() = out_;
  Tensor<T> y(shape);
  gemm(mat(x), mat(weight.value), mat(y));
  if (has_bias_) mat(y).rowwise() += vec(bias.value);
  keep_input(saved, x);
  return y;
}

template <typename T>
Tensor<T> Linear<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  check(dy.cols() == out_ && dy.rows() == saved.t[kX].rows(), "linear: bad output gradient");
  Tensor<T> dx(saved.in_shape);
  gemm(mat(dy), transposed(mat(weight.value)), mat(dx));
  saved.t[kDY] = dy;
  return dx;
}

template <typename T>
void Linear<T>::backward_weight(Saved<T>& saved) {
  const Tensor<T>& x = saved.t[kX];
  const Tensor<T>& dy = saved.t[kDY];
  gemm(transposed(mat(x)), mat(dy), mat(weight.grad), Gemm::kAccumulate);
  if (has_bias_) vec(bias.grad) += mat(dy).colwise().sum();
  saved.clear();
}

template <typename T>
std::vector<Param<T>*> Linear<T>::params() {
  if (has_bias_) return {&weight, &bias};
  return {&weight};
}

template class Linear<float>;
template class Linear<double>;

}  // namespace ppbench::cpu
