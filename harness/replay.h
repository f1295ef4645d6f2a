// Replays a measured step through the simulator: per-stage costs are the
// mean measured durations of each op on that stage, the comm delay the mean
// measured hand-over latency. The gap between the measured and the
// replayed bubble is the simulator's fidelity, reported with every run.
#pragma once

#include "harness/allreduce_cost.h"
#include "harness/cost_model.h"
#include "harness/trace.h"
#include "schedules/placement.h"
#include "schedules/schedule.h"

namespace ppbench {

// Ops a stage never ran (e.g. W in a schedule without splits) get costs
// derived from the ones it did (B = I + W, FB = F + B, ...).
CostModel costs_from_trace(const Trace& trace, const Placement& placement);

// The data parallelism of a measured step with `replicas` replicas, for add_allreduces: each
// stage's gradient bytes as its all-reduces carried them (end of step: a rank's bytes on its
// first stage, all that matters there), and the ring link that makes the ring formula's total
// time equal the measured total (latency 0: one step size cannot tell latency from bandwidth).
DataParallel data_parallel_from_trace(const Trace& trace, const Schedule& s, int replicas,
                                      bool overlap);

}  // namespace ppbench
