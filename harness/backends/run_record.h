// What every backend's `ppbench run` record shares: the step time, the
// activation-memory model, and the measured metrics beside the simulator's
// replay of the same step (docs/architecture.md: the gap is the simulator's fidelity).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "harness/backends/run_loop.h"
#include "harness/backends/step_values.h"
#include "harness/step_memory.h"
#include "harness/trace.h"
#include "schedules/schedule.h"
#include "workloads/layer_spec.h"
#include "workloads/partition.h"

namespace ppbench {

// First action start to the last end of an action, all-reduce or optimizer step, in seconds.
double makespan_of(const Trace& t);

// Per rank, the most activation bytes alive at once: each stage adds its
// spec's M_B after F, keeps M_W from I to W, frees it after B or W, so without
// recompute the peak is at an action boundary or between an overlapped pair's
// halves. With recompute F holds M_B until it ends and then keeps only the
// stage input (the previous stage's boundary); the backward first rebuilds M_B
// in its place (the peak may be there, midway), and a split one leaves M_W for W.
std::vector<double> predicted_peak_bytes(const Schedule& s, const PartitionPlan& plan,
                                         bool recompute);

struct StepSummary {
  const WorkloadSpec* spec;
  const Schedule* schedule;
  const PartitionPlan* plan;
  unsigned long long seed;
  bool recompute;
  const RunTimings& timings;  // measured steps only
  const Trace* trace;         // the last step
  const StepValues& values;   // loss and gradient statistics of the last step
  int replicas = 1;           // data-parallel replicas (the trace holds one replica's ranks)
  bool dp_overlap = false;
};

// What a rank held in a run, in bytes: its parameter, gradient and optimizer-state tensors, its
// activation arena's peak, and the most bytes it had sent that were not yet taken.
struct HeldMemory {
  double params = 0, grads = 0, optimizer = 0, activations = 0, comm = 0;
};

// The record's "memory": per rank what the run held (measured) beside `ppbench memory`'s model
// of the same step.
nlohmann::json memory_json(const std::vector<HeldMemory>& measured, const StepMemory& model);

// The record's common fields: identity and config, the step times (compute
// makespan and wall time per step: median, min, max), throughput, measured and
// replayed metrics of the last step with their gap, loss, grad_norm, the
// gradients' statistics per part and provenance. The caller
// adds its backend's own fields (arena peaks, devices, transport).
nlohmann::json run_record(const StepSummary& s, const char* backend);

}  // namespace ppbench
