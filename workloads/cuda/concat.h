// Channel concatenation and its backward, the split, as workloads/cpu/concat.h (AmoebaNet cell
// outputs, factorized reduce). Both keep nothing: the backward of a concat is a split.
#pragma once

#include <vector>

#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

// Concatenates along the last dimension; all other dimensions and the dtypes must agree.
DTensor concat_channels(Context& ctx, const std::vector<const DTensor*>& xs);

// Splits dy's last dimension into pieces of these widths (which must sum to dy.cols()).
std::vector<DTensor> split_channels(Context& ctx, const DTensor& dy,
                                    const std::vector<std::int64_t>& widths);

}  // namespace ppbench::cuda
