// Proves, before launch, that an NCCL plan completes under NCCL's point-to-point semantics.
//
// Model: NCCL pairs the k-th send from rank a to rank b with the k-th receive on b from a, in
// posting order; the two must agree on tag, bytes and dtype (NCCL itself would silently
// mis-deliver or hang). A transfer runs once both of its ops are posted, i.e. both ranks stand
// at the groups holding them; a rank leaves a group only when all of its ops have transferred,
// and computes never wait. This is stricter than the CPU executor's buffered channels: nothing
// is assumed to be buffered, as NCCL does not buffer sends beyond a small eager threshold.
#pragma once

#include "harness/cuda/nccl_plan.h"

namespace ppbench {

// Where an op lives in a plan.
struct P2POpRef {
  int rank = -1;
  std::size_t step = 0;
  std::size_t op = 0;
};

// The end state of running a plan under the model above.
struct P2PRun {
  std::vector<std::size_t> at;  // rank -> the group it waits in; its step count when finished
  std::vector<std::vector<std::vector<std::uint8_t>>> done;     // [rank][step][op]: transferred
  std::vector<std::vector<std::vector<P2POpRef>>> counterpart;  // [rank][step][op]
  bool finished(const NcclPlan& plan) const;
};

// Matches every op with its counterpart and runs the plan to where it ends or sticks. Throws
// InvalidSchedule when sends and receives of a rank pair do not match up.
P2PRun run_p2p_plan(const NcclPlan& plan);

// Throws InvalidSchedule naming the rank, the group and the op that can never complete (with
// where its peer is stuck), or the first send/receive pair that disagrees.
void check_p2p_deadlock_free(const NcclPlan& plan);

}  // namespace ppbench
