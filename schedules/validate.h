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

#include "schedules/schedule.h"

namespace ppbench {

struct ValidateOptions {
  int channel_capacity = 0;  // messages a (src, dst) mailbox holds; 0: unbounded
};

void validate(const Schedule& s, const ValidateOptions& options = {});

}  // namespace ppbench
