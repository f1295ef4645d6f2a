#include "workloads/cpu/swiglu.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

namespace {
enum Slot { kGateUp, kSlots };
enum Sub { kGateUpLinear, kDown, kSubs };

template <typename T>
T sigmoid(T z) {
  return T(1) / (T(1) + std::exp(-z));
}
}  // namespace

template <typename T>
SwiGLU<T>::SwiGLU(std::int64_t hidden, std::int64_t ffn, std::uint64_t seed) : ffn_(ffn) {
  gate_up_ = std::make_unique<Linear<T>>(hidden, 2 * ffn, false, derive_seed(seed, 0));
  down_ = std::make_unique<Linear<T>>(ffn, hidden, false, derive_seed(seed, 1));
  gate_up_->weight.name = "w_gate_up";
  down_->weight.name = "w_down";
}

template <typename T>
Tensor<T> SwiGLU<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  saved.clear();
  saved.in_shape = x.shape;
  saved.sub.resize(kSubs);
  saved.t.resize(kSlots);
  Tensor<T> gu = gate_up_->forward(x, saved.sub[kGateUpLinear]);
  std::vector<std::int64_t> shape = x.shape;
  shape.back() = ffn_;
  Tensor<T> a(shape);
  auto GU = mat(gu);
  auto A = mat(a);
  for (std::int64_t r = 0; r < A.rows(); ++r) {
    for (std::int64_t j = 0; j < ffn_; ++j) {
      const T g = GU(r, j);
      A(r, j) = g * sigmoid(g) * GU(r, ffn_ + j);
    }
  }
  saved.t[kGateUp] = std::move(gu);
  return down_->forward(a, saved.sub[kDown]);
}

template <typename T>
Tensor<T> SwiGLU<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  Tensor<T> da = down_->backward_input(dy, saved.sub[kDown]);
  Tensor<T>& gu = saved.t[kGateUp];
  Tensor<T> dgu(gu.shape);
  auto GU = mat(gu);
  auto dA = mat(da);
  auto dGU = mat(dgu);
  for (std::int64_t r = 0; r < dA.rows(); ++r) {
    for (std::int64_t j = 0; j < ffn_; ++j) {
      const T g = GU(r, j), u = GU(r, ffn_ + j), s = sigmoid(g);
      dGU(r, j) = dA(r, j) * u * s * (T(1) + g * (T(1) - s));  // d silu(g) / dg
      dGU(r, ffn_ + j) = dA(r, j) * g * s;
    }
  }
  gu.release();
  return gate_up_->backward_input(dgu, saved.sub[kGateUpLinear]);
}

template <typename T>
void SwiGLU<T>::backward_weight(Saved<T>& saved) {
  gate_up_->backward_weight(saved.sub[kGateUpLinear]);
  down_->backward_weight(saved.sub[kDown]);
  saved.clear();
}

template <typename T>
std::vector<Param<T>*> SwiGLU<T>::params() {
  return {&gate_up_->weight, &down_->weight};
}

template class SwiGLU<float>;
template class SwiGLU<double>;

}  // namespace ppbench::cpu
