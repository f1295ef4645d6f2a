// Batch norm over the channel (last) dimension of an NHWC tensor, with PER-MICRO-BATCH
// statistics: mean and (biased) variance are taken over the N*H*W positions of the micro-batch
// being processed, never over the whole mini-batch. This is GPipe's semantics ("batch norm
// statistics are computed per micro-batch"), and it makes a pipelined step compute exactly what a
// single device computes when it runs the same micro-batches one after another. No running
// statistics are kept: ppbench only trains.
#pragma once

#include "workloads/cpu/normalize.h"

namespace ppbench::cpu {

// Norm's Saved layout and W (normalize.h), with the statistics taken down the columns.
template <typename T>
class BatchNorm final : public Norm<T> {
 public:
  // gamma = 1, beta = 0.
  explicit BatchNorm(std::int64_t channels, double eps = 1e-5);

  // F keeps xhat and rstd [C]. I needs dgamma and dbeta for dx anyway, keeps those two [C]
  // vectors for W and frees xhat.
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
};

}  // namespace ppbench::cpu
