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

#include "harness/backends/step_values.h"
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
  // Keep the last step's gradient tensors in RunOutput::values (tests); off, only their
  // statistics are computed, once, after the last step.
  bool keep_gradients = false;
  // --check: also compute the step on one device and record the largest relative gradient
  // error per tensor (and fail past the tolerance: 0 takes check_tolerance(dtype)).
  bool check = false;
  double check_tolerance = 0;
};

struct RunOutput {
  nlohmann::json record;  // the JSON record (config, provenance, metrics, ...)
  Trace trace;            // the last measured step
  StepValues values;      // of the last step
};

// The message of a failed --check, or "" (the record's "check" object says why).
std::string check_failure(const nlohmann::json& record);

// Throws UsageError for parameters or shapes the run cannot take.
RunOutput run_cpu(const WorkloadSpec& spec, const RunOptions& options);

// The same step on one device in float64: every micro-batch forward through all
// layers, then backward (I then W) in reverse, gradients accumulated. Keeps every
// gradient tensor (it is the reference the others are compared with).
StepValues single_device_step(const WorkloadSpec& spec, int microbatches, std::uint64_t seed);

}  // namespace ppbench
