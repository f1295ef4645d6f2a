// Replays a measured step through the simulator: per-stage costs are the
// mean measured durations of each op on that stage, the comm delay the mean
// measured hand-over latency. The gap between the measured and the
// replayed bubble is the simulator's fidelity, reported with every run.
#pragma once

#include "harness/cost_model.h"
#include "harness/trace.h"
#include "schedules/placement.h"

namespace ppbench {

// Ops a stage never ran (e.g. W in a schedule without splits) get costs
// derived from the ones it did (B = I + W, FB = F + B, ...).
CostModel costs_from_trace(const Trace& trace, const Placement& placement);

}  // namespace ppbench
