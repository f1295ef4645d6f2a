// Joins and forks of tensors: channel concatenation (AmoebaNet cell outputs, factorized reduce)
// and addition (residual connections, the sums of AmoebaNet's op pairs). They keep nothing: the
// backward of a concat is a split, the backward of an add hands dy to both inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/cpu/tensor.h"

namespace ppbench::cpu {

// Concatenates along the last dimension; all other dimensions must agree.
template <typename T>
Tensor<T> concat_channels(const std::vector<const Tensor<T>*>& xs);

// The backward of concat_channels: splits dy's last dimension into pieces of these widths.
template <typename T>
std::vector<Tensor<T>> split_channels(const Tensor<T>& dy, const std::vector<std::int64_t>& widths);

template <typename T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b);

// a += b, for accumulating gradients of a tensor used twice.
template <typename T>
void add_into(Tensor<T>& a, const Tensor<T>& b);

}  // namespace ppbench::cpu
