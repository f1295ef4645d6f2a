#include "workloads/cpu/optimizer.h"

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

namespace ppbench::cpu {

namespace {
template <typename T>
using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
Eigen::Map<Array<T>> view(T* x, std::size_t n) {
  return Eigen::Map<Array<T>>(x, static_cast<Eigen::Index>(n));
}
template <typename T>
Eigen::Map<const Array<T>> view(const T* x, std::size_t n) {
  return Eigen::Map<const Array<T>>(x, static_cast<Eigen::Index>(n));
}
}  // namespace

template <typename T>
void sgd_update(T* p, const T* g, std::size_t n, double lr) {
  view(p, n) -= static_cast<T>(lr) * view(g, n);
}

template <typename T>
void adamw_update(T* p, const T* g, T* m, T* v, std::size_t n, const AdamWStep& s) {
  const T b1 = static_cast<T>(s.beta1), b2 = static_cast<T>(s.beta2);
  const double t = static_cast<double>(s.t);
  // The bias corrections folded into two scalars, as PyTorch does: step size lr / (1 - b1^t)
  // and sqrt(1 - b2^t) dividing the second moment's root.
  const T step = static_cast<T>(s.lr / (1 - std::pow(s.beta1, t)));
  const T root_correction = static_cast<T>(std::sqrt(1 - std::pow(s.beta2, t)));
  const T decay = static_cast<T>(1 - s.lr * s.weight_decay);
  const T eps = static_cast<T>(s.eps);
  // Block by block, so that each element crosses the memory bus once (read p, g, m, v; write p,
  // m, v): as four whole-array statements, p, g, m and v were each read twice, 12 passes of
  // memory traffic instead of 7. A block of every array stays in the L1/L2 cache between the
  // statements.
  constexpr std::size_t kBlock = 1024;
  for (std::size_t at = 0; at < n; at += kBlock) {
    const std::size_t len = std::min(kBlock, n - at);
    auto P = view(p + at, len);
    auto M = view(m + at, len);
    auto V = view(v + at, len);
    const auto G = view(g + at, len);
    M = b1 * M + (1 - b1) * G;
    V = b2 * V + (1 - b2) * G * G;
    P = P * decay - step * M / (V.sqrt() / root_correction + eps);
  }
}

template void sgd_update<float>(float*, const float*, std::size_t, double);
template void sgd_update<double>(double*, const double*, std::size_t, double);
template void adamw_update<float>(float*, const float*, float*, float*, std::size_t,
                                  const AdamWStep&);
template void adamw_update<double>(double*, const double*, double*, double*, std::size_t,
                                   const AdamWStep&);

}  // namespace ppbench::cpu
