// The `mlp` workload: `layers` linear layers; all but the last are linear (with bias) + GeLU
// blocks of `width` outputs, the last maps to `classes` logits and carries the softmax
// cross-entropy loss, so the loss lives on the last stage.
#pragma once

#include <cstdint>

#include "workloads/layer_spec.h"

namespace ppbench {

struct MlpConfig {
  int64_t layers = 8;     // linear layers, the loss head included
  int64_t width = 1024;   // hidden features
  int64_t input_dim = 0;  // 0: same as width
  int64_t classes = 10;

  // Throws UsageError naming the bad value.
  void validate() const;
};

WorkloadSpec build_mlp(const MlpConfig& cfg, int64_t microbatch_size, DType dtype);

}  // namespace ppbench
