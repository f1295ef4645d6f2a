// Discrete-event simulation of a schedule under a cost model.
//
// Each rank runs its actions in order; an action starts when its rank is free
// and every task it depends on has ended (plus the comm delay when the
// producer sits on another rank). Because per-rank orders are fixed, the start
// times follow from one walk in dependency order: linear in the number of
// actions, with no event queue.
#pragma once

#include "harness/cost_model.h"
#include "harness/trace.h"
#include "schedules/schedule.h"

namespace ppbench {

struct SimulateOptions {
  bool record_comm = true;  // add a CommEvent for every cross-rank dependency
};

// Throws InvalidSchedule if the schedule deadlocks. Validate first for the
// structural checks (validate.h).
Trace simulate(const Schedule& s, const CostModel& costs, const SimulateOptions& options = {});

}  // namespace ppbench
