// `ppbench run --backend cpu`: real training steps of a workload under a
// schedule, on CPU threads, with the measured and the predicted metrics.
//
// A step is forward and backward of N micro-batches with gradients
// accumulated (the optimizer update is outside the pipeline and not run), so
// every step computes the same loss and gradients, and those must equal the
// single-device step's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/executor/cpu_executor.h"
#include "harness/trace.h"
#include "schedules/schedule.h"
#include "workloads/layer_spec.h"

namespace ppbench {

struct RunOptions {
  ScheduleParams schedule;
  std::string partition = "balanced";
  int steps = 1;
  int warmup = 0;
  std::uint64_t seed = 1234;
  bool recompute = false;
  ExecutorOptions executor;
  bool progress = false;  // one line per step on stderr
};

// What a step computed, for the equivalence tests: the mean loss over the N
// micro-batches and every parameter gradient in layer order (copies of a
// stage summed).
struct StepValues {
  double loss = 0;
  std::vector<double> grads;
  double grad_norm() const;
};

struct RunOutput {
  nlohmann::json record;  // the JSON record (config, provenance, metrics, ...)
  Trace trace;            // the last measured step
  StepValues values;      // of the last step
};

// Throws UsageError for parameters or shapes the run cannot take.
RunOutput run_cpu(const WorkloadSpec& spec, const RunOptions& options);

// The same step on one device: every micro-batch forward through all layers,
// then backward (I then W) in reverse, gradients accumulated.
StepValues single_device_step(const WorkloadSpec& spec, int microbatches, std::uint64_t seed);

}  // namespace ppbench
