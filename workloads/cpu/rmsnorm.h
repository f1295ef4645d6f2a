// RMSNorm over the last dimension (Llama): y = x / sqrt(mean(x^2) + eps) * gamma, per token.
// The passes are RowNorm's (normalize.h), uncentred and without beta.
#pragma once

#include "workloads/cpu/normalize.h"

namespace ppbench::cpu {

template <typename T>
class RMSNorm final : public RowNorm<T> {
 public:
  // gamma = 1.
  explicit RMSNorm(std::int64_t features, double eps = 1e-5);
};

}  // namespace ppbench::cpu
