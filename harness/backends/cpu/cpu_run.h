// `ppbench run --backend cpu`: real training steps of a workload under a
// schedule, on CPU threads, with the measured and the predicted metrics.
//
// A step is forward and backward of N micro-batches with gradients
// accumulated (the optimizer update is outside the pipeline and not run), so
// every step computes the same loss and gradients, and those must equal the
// single-device step's.
#pragma once

#include <cstdint>

#include "harness/backends/run_options.h"
#include "workloads/layer_spec.h"

namespace ppbench {

// Throws UsageError for parameters or shapes the run cannot take.
RunOutput run_cpu(const WorkloadSpec& spec, const RunOptions& options);

// The same step on one device in float64: every micro-batch forward through all
// layers, then backward (I then W) in reverse, gradients accumulated. Keeps every
// gradient tensor (it is the reference the others are compared with).
StepValues single_device_step(const WorkloadSpec& spec, int microbatches, std::uint64_t seed);

}  // namespace ppbench
