// The arguments of every ncclSend / ncclRecv of a step, built on the host from the lowered
// program (schedules/lower.h), so that the GPU executor only replays them.
//
// Grouping: the lowering puts the sends of an action right after it and the receives of the
// next action right before that one, so the Send/Recv instructions between two computes are one
// ncclGroupStart/ncclGroupEnd group. NCCL point-to-point is a rendezvous (a large send does not
// complete before its receive is posted), so posting those ops one by one can deadlock where
// the channel model of the CPU executor does not: in 1F1B's steady state rank r sends F to r+1
// while r+1 sends B to r, and both wait. Inside a group NCCL progresses all ops together.
// p2p_deadlock_check.h proves the grouped plan completes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/lower.h"
#include "schedules/schedule.h"

namespace ppbench {

// The element types a stage boundary carries; mirrors ncclDataType_t without including nccl.h.
enum class WireDType : std::uint8_t { F32, BF16, F16, F64 };

std::size_t wire_dtype_bytes(WireDType t);
std::string_view nccl_dtype_name(WireDType t);  // "ncclFloat32", "ncclBfloat16", ...

// Sender and receiver compute the same tag for a payload, so a mismatch between the k-th send
// and the k-th receive of a rank pair (the order NCCL matches them in) is caught before launch.
// B and I of a (stage, micro-batch) share a tag: either one produces the input gradient, and the
// lowering names the receive "B" whichever the producer runs.
std::uint64_t p2p_tag(const Task& payload);

struct P2POp {
  enum class Dir : std::uint8_t { Send, Recv };
  Dir dir = Dir::Send;
  int peer = -1;
  std::size_t bytes = 0;
  std::size_t count = 0;  // elements of `dtype`: what ncclSend / ncclRecv take
  WireDType dtype = WireDType::F32;
  std::uint64_t tag = 0;
  Task payload;           // for messages and traces
  std::size_t instr = 0;  // index of the lowered instruction this op comes from
};

// One rank's step: a compute, or a group of point-to-point ops posted between
// ncclGroupStart and ncclGroupEnd.
struct P2PStep {
  bool is_group = false;
  Action action;           // when !is_group
  std::vector<P2POp> ops;  // when is_group, in the order of the lowered program
};

struct NcclPlan {
  std::vector<std::vector<P2PStep>> ranks;
  int hoisted_receives = 0;  // receives posted earlier to follow the sender's order
  int deferred_sends = 0;    // moves of a send one group later (each delays its receiver)
};

struct NcclPlanOptions {
  // Bytes of the activation leaving stage s (its F output); the gradient sent back by B or I of
  // stage s is the size of what entered it, activation_bytes[s - 1]. One entry per stage.
  std::vector<std::size_t> activation_bytes;
  WireDType dtype = WireDType::BF16;
  // false posts every op in its own group: only for showing why grouping is needed.
  bool group_consecutive = true;
  // false keeps every send where the lowering put it: only for showing why deferral is needed.
  bool defer_blocked_sends = true;
};

// Throws UsageError when activation_bytes does not have one positive entry per stage, or an
// entry is not a whole number of `dtype` elements.
NcclPlan build_nccl_plan(const Schedule& s, const Program& program, const NcclPlanOptions& o);

// Reorders each rank's receives from each peer into the order the peer sends them, hoisting a
// receive into an earlier group where needed. Returns how many receives were hoisted.
int match_receive_order(NcclPlan& plan);

// Moves the sends that block a plan under rendezvous semantics to the sender's next group, until
// the plan completes or nothing can move (a real deadlock, which the checker then reports).
// Returns how many moves it made. Keeps the per-peer order of sends, which NCCL matches by.
int defer_blocked_sends(NcclPlan& plan);

// The (sender, receiver) rank pairs the plan's sends use, each once, sender then receiver in
// rising order: the links a transport sets up before the first step (GpuTransport::connect).
std::vector<std::pair<int, int>> send_links(const NcclPlan& plan);

std::string to_string(const P2POp& op);     // "send(F0.3->1, 4096 B)"
std::string to_text(const NcclPlan& plan);  // one line per rank, groups in [ ]

}  // namespace ppbench
