// Softmax cross-entropy, as cpu::SoftmaxCrossEntropy: loss = mean over rows of
// (logsumexp(z_r) - z_r[target_r]); dlogits = scale * (softmax - onehot) / rows.
// The loss stays on the device (an f32 [1] tensor) so that the last stage never synchronises.
#pragma once

#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

class SoftmaxCrossEntropy {
 public:
  // F: keeps the probabilities (logits' dtype) and the int32 targets [rows] for I.
  DTensor forward(Context& ctx, const DTensor& logits, const DTensor& targets, Saved& saved);
  // I: dlogits written over the saved probabilities; frees saved.
  DTensor backward_input(Context& ctx, Saved& saved, float scale = 1.0f);
};

}  // namespace ppbench::cuda
