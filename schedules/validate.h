// Proves a schedule sound before anything runs, or says which rank and action
// break it (InvalidSchedule).
//
// Checks, in order: every action names a stage that exists and lives on the
// rank that runs it, and a micro-batch its chain carries; every (stage, mb)
// gets exactly one F and either one B or one I and one W; overlapped pairs are
// a forward and a backward of two different (stage, mb); the per-rank orders
// respect every dependency, i.e. no rank waits forever (deadlock).
#pragma once

#include "schedules/schedule.h"

namespace ppbench {

void validate(const Schedule& s);

}  // namespace ppbench
