// The `amoebanet` workload: AmoebaNet-D(L, D) for ImageNet as GPipe trains it (docs/papers.md):
//   stem (ReLU, 3x3 stride-2 conv 3 -> D/4, BN) -> 2 reduction cells -> L/3 normal cells ->
//   reduction -> L/3 normal -> reduction -> L/3 normal -> global average pool -> linear.
// One partitionable layer per stem, cell and classifier: L + 6 layers. Cells read the two previous
// outputs, so the boundary after a cell is two tensors (its output and its own first input).
//
// Parameters are counted from the structure: convolution weights (no biases), BatchNorm gain and
// shift (running statistics are buffers, not parameters), the classifier's weight and bias.
#pragma once

#include <cstdint>

#include "workloads/layer_spec.h"

namespace ppbench {

struct AmoebaNetConfig {
  int64_t layers = 18;    // L: normal cells, a multiple of 3
  int64_t filters = 256;  // D
  int64_t image_size = 224;
  int64_t classes = 1000;

  // Throws UsageError naming the bad value.
  void validate() const;
};

WorkloadSpec build_amoebanet(const AmoebaNetConfig& cfg, int64_t microbatch_size, DType dtype);

}  // namespace ppbench
