// Discrete-event simulation of a schedule under a cost model.
//
// Each rank runs its actions in order; an action starts when its rank is free
// and every task it depends on has ended (plus the comm delay when the
// producer sits on another rank), and then after the rank has taken in each input from another
// rank (StageCost::recv, 0 unless a measured step's replay sets it). Because per-rank orders are
// fixed, the start times follow from one walk in dependency order: linear in the number of actions,
// with no event queue.
//
// Where the ranks share fewer cores than there are ranks (a CPU run with more rank threads than
// cores), an action also waits for a free core: actions take the cores in the order their
// inputs are ready (first ready, first served, each action to its end). That walk keeps the
// ready actions in a heap, O(A log D + A W) for A actions and W ranks waiting on an input.
#pragma once

#include <cstddef>
#include <vector>

#include "harness/cost_model.h"
#include "harness/metrics.h"
#include "harness/trace.h"
#include "schedules/schedule.h"

namespace ppbench {

// An optimizer step to replay (a measured run's UpdateEvent, replay.h): `rank` spends `duration`
// after the action at `position` in its order and the sends of that action's outputs, as both
// executors run a stage's update once its last backward's outputs have left: it holds back the
// rank's next action, not the ranks waiting for those outputs.
struct OptimizerStep {
  int rank = 0;
  std::size_t position = 0;
  int stage = 0;
  double duration = 0;
};

struct SimulateOptions {
  bool record_comm = true;  // add a CommEvent for every cross-rank dependency
  std::vector<OptimizerStep> optimizer_steps = {};  // each becomes an UpdateEvent in the trace
  int cores = 0;  // cores the ranks share; 0 (or at least the ranks): a device per rank
};

// The timeline: every action's start and end, (record_comm) every transfer, and the optimizer
// steps asked for. Throws InvalidSchedule, as validate() words it, if the schedule deadlocks, and
// std::invalid_argument for an optimizer step outside a rank's order or a negative core count.
// Check the structure first (validate_structure or validate, validate.h).
Trace simulate(const Schedule& s, const CostModel& costs, const SimulateOptions& options = {});

// The step's metrics, equal to compute_metrics(simulate(s, costs), s.placement), computed during
// the walk without keeping any event: 16 bytes per (stage, micro-batch) beside the schedule, for
// `ppbench simulate` without --trace-out and for searches that simulate many candidates.
Metrics simulate_metrics(const Schedule& s, const CostModel& costs, int cores = 0);

}  // namespace ppbench
