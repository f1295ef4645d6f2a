// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * gamma + beta, with the
// biased variance, per token. The passes are RowNorm's (normalize.h).
#pragma once

#include "workloads/cpu/normalize.h"

namespace ppbench::cpu {

template <typename T>
class LayerNorm final : public RowNorm<T> {
 public:
  // gamma = 1, beta = 0 (no randomness, so no seed).
  explicit LayerNorm(std::int64_t features, double eps = 1e-5);
};

}  // namespace ppbench::cpu
