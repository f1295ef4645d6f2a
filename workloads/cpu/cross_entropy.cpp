#include "workloads/cpu/cross_entropy.h"

#include <cmath>
#include <string>

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

namespace {
enum Slot { kProbs, kTargets, kSlots };
}

template <typename T>
T SoftmaxCrossEntropy<T>::forward(const Tensor<T>& logits, const std::vector<std::int32_t>& targets,
                                  Saved<T>& saved) {
  const std::int64_t rows = logits.rows(), classes = logits.cols();
  check(static_cast<std::int64_t>(targets.size()) == rows, "cross-entropy: one target per row");
  Tensor<T> probs(logits.shape), tgt({rows});
  auto Z = mat(logits);
  auto P = mat(probs);
  // Accumulate in double: the loss is a sum over every token of the micro-batch.
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t t = targets[static_cast<std::size_t>(r)];
    check(t >= 0 && t < classes, "cross-entropy: target out of range");
    // Kept as a value of T for the backward: a target T cannot hold exactly would move the gradient
    // to another class (or, rounded up to `classes`, past the row). Callers refuse such class
    // counts up front (harness/backends/cpu/model_builder.h); this keeps it from being silent.
    if (static_cast<std::int64_t>(static_cast<T>(t)) != t)
      check(false, "cross-entropy: target " + std::to_string(t) + " is not exact in this dtype");
    const T m = Z.row(r).maxCoeff();
    P.row(r) = (Z.row(r).array() - m).exp();
    const T sum = P.row(r).sum();
    P.row(r) /= sum;
    total += static_cast<double>(std::log(sum) + m - Z(r, t));
    tgt.data[static_cast<std::size_t>(r)] = static_cast<T>(t);
  }
  saved.clear();
  saved.in_shape = logits.shape;
  saved.t.resize(kSlots);
  saved.t[kProbs] = std::move(probs);
  saved.t[kTargets] = std::move(tgt);
  return static_cast<T>(total / static_cast<double>(rows));
}

template <typename T>
Tensor<T> SoftmaxCrossEntropy<T>::backward_input(Saved<T>& saved, T scale) {
  Tensor<T> dz = std::move(saved.t[kProbs]);
  const std::int64_t rows = dz.rows();
  auto dZ = mat(dz);
  for (std::int64_t r = 0; r < rows; ++r) {
    dZ(r, static_cast<std::int64_t>(saved.t[kTargets].data[static_cast<std::size_t>(r)])) -= T(1);
  }
  dZ *= scale / static_cast<T>(rows);
  saved.clear();
  return dz;
}

template class SoftmaxCrossEntropy<float>;
template class SoftmaxCrossEntropy<double>;

}  // namespace ppbench::cpu
