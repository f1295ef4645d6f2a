// Softmax cross-entropy, the loss on the last stage and the seed of every backward:
//   loss = mean over the rows of the micro-batch of (logsumexp(z_r) - z_r[target_r])
// where rows are tokens ([batch, seq, vocab] logits) or samples ([batch, classes]). To make a
// step of N micro-batches equal one big batch, the executor passes scale = 1/N to backward.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/cpu/tensor.h"

namespace ppbench::cpu {

template <typename T>
class SoftmaxCrossEntropy {
 public:
  // F: keeps the probabilities [rows, classes] and the targets for I.
  T forward(const Tensor<T>& logits, const std::vector<std::int32_t>& targets, Saved<T>& saved);
  // I: dlogits = scale * (softmax - onehot) / rows. Frees saved (no parameters, no W).
  Tensor<T> backward_input(Saved<T>& saved, T scale = T(1));
};

}  // namespace ppbench::cpu
