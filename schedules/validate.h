// Proves a schedule sound before anything runs, or says which rank and action
// break it (InvalidSchedule).
//
// Checks, in order: every action names a stage that exists and lives on the
// rank that runs it, and a micro-batch its chain carries; every (stage, mb)
// gets exactly one F and either one B or one I and one W; overlapped pairs are
// a forward and a backward of two different (stage, mb); the per-rank orders
// respect every dependency, i.e. no rank waits forever (deadlock); and the
// lowered send/receive program cannot deadlock on the transport's channels.
//
// With unbounded channels (sends never block) the lowered program stalls
// exactly when the dependency walk does: every receive waits for a send that
// follows its producer at once. So the lowered program is run separately
// only for bounded channels, where a full mailbox can block a sender.
#pragma once

#include <vector>

#include "schedules/deps.h"
#include "schedules/schedule.h"

namespace ppbench {

struct ValidateOptions {
  int channel_capacity = 0;  // messages a (src, dst) mailbox holds; 0: unbounded
};

void validate(const Schedule& s, const ValidateOptions& options = {});

// validate() for a run whose mailboxes hold `channel_capacity` messages (0: the schedule's default,
// resolve_channel_capacity in lower.h); returns the capacity the run is proven to run with.
int validate_for_run(const Schedule& s, int channel_capacity);

// The structural checks of validate() alone (every action on the rank holding its stage, every
// task exactly once, pairs well formed), for a caller that walks the schedule in dependency
// order anyway (the simulator) and reports a stall through explain_stall.
void validate_structure(const Schedule& s);

// Throws the InvalidSchedule that validate() gives for these stalls of
// walk_in_dependency_order (schedules/deps.h): the out-of-order action or the wait-for cycle.
[[noreturn]] void explain_stall(const Schedule& s, const std::vector<Stall>& stalls);

}  // namespace ppbench
