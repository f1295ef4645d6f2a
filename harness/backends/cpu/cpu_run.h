// `ppbench run --backend cpu`: real training steps of a workload under a
// schedule, on CPU threads, with the measured and the predicted metrics.
//
// A step is forward and backward of N micro-batches with gradients accumulated, then, with
// an optimizer (RunOptions::optimizer), each stage's parameters updated right after its last
// backward: a step's loss and gradients must equal those of the same number of steps on a
// single device.
#pragma once

#include <cstdint>

#include "harness/backends/run_options.h"
#include "workloads/layer_spec.h"

namespace ppbench {

// Throws UsageError for parameters or shapes the run cannot take.
RunOutput run_cpu(const WorkloadSpec& spec, const RunOptions& options);

// The same step on one device in float64: every micro-batch forward through all
// layers, then backward (I then W) in reverse, gradients accumulated. Keeps every
// gradient tensor (it is the reference the others are compared with). With `steps` > 1, the
// optimizer updates the parameters after each step but the last, whose loss and gradients are
// returned.
StepValues single_device_step(const WorkloadSpec& spec, int microbatches, std::uint64_t seed,
                              int steps = 1, const OptimizerOptions& optimizer = {});

}  // namespace ppbench
