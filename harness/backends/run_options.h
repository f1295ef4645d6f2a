// What `ppbench run` asks of any backend, and what every backend returns (harness/backends/
// cpu/cpu_run.h, harness/cuda/cuda_run.h): kept apart from both so that neither links the other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/backends/step_values.h"
#include "harness/executor/executor_core.h"
#include "harness/optimizer.h"
#include "harness/trace.h"
#include "schedules/registry.h"
#include "schedules/schedule.h"

namespace ppbench {

struct RunOptions {
  ScheduleParams schedule;
  // --schedule-file: this schedule (validated) instead of one generated from `schedule`, which
  // then holds its parameters.
  std::shared_ptr<const Schedule> file_schedule;
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
  // The optimizer step after each stage's last backward (none: forward and backward only).
  OptimizerOptions optimizer;
};

// The schedule `o` runs: the file's, or the one generated from o.schedule.
inline Schedule schedule_of(const RunOptions& o) {
  return o.file_schedule ? *o.file_schedule : generate(o.schedule);
}

struct RunOutput {
  // False on the processes of a multi-process run other than process 0, which reports for all.
  bool report = true;
  nlohmann::json record;  // the JSON record (config, provenance, metrics, ...)
  Trace trace;            // the last measured step
  StepValues values;      // of the last step
};

}  // namespace ppbench
