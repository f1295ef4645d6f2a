// What the executor asks of a workload: the F, B, I and W passes of a stage
// for one micro-batch. The executor decides when; the workload decides how.
#pragma once

#include <cstddef>

namespace ppbench {

template <class Payload>
class StageWork {
 public:
  virtual ~StageWork() = default;
  // F of (stage, mb). `input` is the previous stage's output, or empty on the
  // first stage of a chain (the workload reads its own micro-batch there).
  // Returns the output sent to the next stage (ignored on the last stage).
  virtual Payload forward(int stage, int mb, Payload input) = 0;
  // B, or I when `split`: `grad_output` is the next stage's input gradient,
  // or empty on the last stage (the workload seeds it from the loss).
  // Returns the gradient of the stage's input (ignored on the first stage).
  virtual Payload backward(int stage, int mb, Payload grad_output, bool split) = 0;
  // W of (stage, mb), after its I.
  virtual void backward_weight(int stage, int mb) = 0;
  // Bytes the stage keeps for later backward passes, all micro-batches.
  virtual std::size_t saved_bytes(int stage) const = 0;
  // The most bytes the rank's stages held together at any moment since the last call, where a
  // pass holds more midway than at its end (a recomputing backward first rebuilds its stage's
  // activations); 0 where no pass does.
  virtual std::size_t transient_peak_bytes() { return 0; }
};

}  // namespace ppbench
