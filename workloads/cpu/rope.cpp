#include "workloads/cpu/rope.h"

#include <cmath>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

template <typename T>
void rope_rotate(Tensor<T>& x, std::int64_t heads, std::int64_t head_dim, double theta,
                 bool inverse) {
  check(x.shape.size() == 3 && x.dim(2) == heads * head_dim,
        "rope: expects [batch, seq, "
        "heads * head_dim]");
  check(head_dim % 2 == 0, "rope: head_dim must be even");
  const std::int64_t batch = x.dim(0), seq = x.dim(1), half = head_dim / 2;
  // Angles in double, then rounded: float and double runs rotate by the same angles.
  std::vector<T> cos_t(static_cast<std::size_t>(seq * half)), sin_t(cos_t.size());
  for (std::int64_t p = 0; p < seq; ++p) {
    for (std::int64_t i = 0; i < half; ++i) {
      const double freq =
          std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(p) * freq;
      cos_t[static_cast<std::size_t>(p * half + i)] = static_cast<T>(std::cos(angle));
      sin_t[static_cast<std::size_t>(p * half + i)] =
          static_cast<T>(inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t p = 0; p < seq; ++p) {
      for (std::int64_t h = 0; h < heads; ++h) {
        T* v = x.data.data() + ((b * seq + p) * heads + h) * head_dim;
        for (std::int64_t i = 0; i < half; ++i) {
          const T c = cos_t[static_cast<std::size_t>(p * half + i)];
          const T s = sin_t[static_cast<std::size_t>(p * half + i)];
          const T x1 = v[i], x2 = v[i + half];
          v[i] = x1 * c - x2 * s;
          v[i + half] = x1 * s + x2 * c;
        }
      }
    }
  }
}

template <typename T>
RotaryEmbedding<T>::RotaryEmbedding(std::int64_t heads, std::int64_t head_dim, double theta)
    : heads_(heads), head_dim_(head_dim), theta_(theta) {}

template <typename T>
Tensor<T> RotaryEmbedding<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  Tensor<T> y = x;
  rope_rotate(y, heads_, head_dim_, theta_, false);
  saved.clear();
  saved.in_shape = x.shape;
  return y;
}

template <typename T>
Tensor<T> RotaryEmbedding<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  Tensor<T> dx = dy;
  rope_rotate(dx, heads_, head_dim_, theta_, true);
  saved.clear();
  return dx;
}

template void rope_rotate(Tensor<float>&, std::int64_t, std::int64_t, double, bool);
template void rope_rotate(Tensor<double>&, std::int64_t, std::int64_t, double, bool);
template class RotaryEmbedding<float>;
template class RotaryEmbedding<double>;

}  // namespace ppbench::cpu
