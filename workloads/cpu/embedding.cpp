#include "workloads/cpu/embedding.h"

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

namespace {
enum Slot { kIds, kDY, kSlots };
}

template <typename T>
Embedding<T>::Embedding(std::int64_t vocab, std::int64_t hidden, std::uint64_t seed)
    : vocab_(vocab), hidden_(hidden) {
  check(vocab > 0 && hidden > 0, "embedding: sizes must be positive");
  table.init("embedding", {vocab, hidden});
  fill_symmetric(table.value, param_key(seed, 0), 1.0);
}

template <typename T>
Tensor<T> Embedding<T>::forward(const Tensor<T>& ids, Saved<T>& saved) {
  std::vector<std::int64_t> shape = ids.shape;
  shape.push_back(hidden_);
  Tensor<T> y(shape);
  auto Y = MatMap<T>(y.data.data(), ids.numel(), hidden_);
  auto table_m = mat(table.value);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    const auto id = static_cast<std::int64_t>(ids.data[static_cast<std::size_t>(i)]);
    check(id >= 0 && id < vocab_, "embedding: token id out of range");
    Y.row(i) = table_m.row(id);
  }
  saved.clear();
  saved.in_shape = ids.shape;
  saved.t.resize(kSlots);
  saved.t[kIds] = ids;
  return y;
}

template <typename T>
Tensor<T> Embedding<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  check(dy.numel() == saved.t[kIds].numel() * hidden_, "embedding: bad output gradient");
  saved.t[kDY] = dy;
  return Tensor<T>(saved.in_shape);
}

template <typename T>
void Embedding<T>::backward_weight(Saved<T>& saved) {
  const Tensor<T>& ids = saved.t[kIds];
  auto dY = ConstMatMap<T>(saved.t[kDY].data.data(), ids.numel(), hidden_);
  auto dtable = mat(table.grad);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    dtable.row(static_cast<std::int64_t>(ids.data[static_cast<std::size_t>(i)])) += dY.row(i);
  }
  saved.clear();
}

template class Embedding<float>;
template class Embedding<double>;

}  // namespace ppbench::cpu
