// The hinge of ppbench (docs/architecture.md): per-rank timed events that the simulator and every
// real backend produce alike, so metrics, plots and exports are written once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/action.h"

namespace ppbench {

struct ComputeEvent {
  std::int32_t rank;
  double start, end;
  Action action;
};

// A tensor crossing ranks: the output of `task` (activation after F,
// gradient after B or I) from the producer's rank to the consumer's.
struct CommEvent {
  std::int32_t src_rank, dst_rank;
  double start, end;
  Task task;
};

struct MemorySample {
  std::int32_t rank;
  double time;
  double live_bytes;
};

struct Trace {
  std::string source = "simulator";  // "simulator", "cpu", "cuda"
  std::string time_unit = "unit";    // "unit" (cost-model units) or "s"
  int ranks = 0;
  std::vector<ComputeEvent> compute;  // each rank's events in execution order
  std::vector<CommEvent> comm;
  std::vector<MemorySample> memory;
};

}  // namespace ppbench
