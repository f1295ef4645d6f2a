// Communication lowering: derives every send and receive from the stage
// placement (generators never write them), and proves the lowered per-rank
// programs cannot deadlock under the transport's channel semantics.
//
// For each action whose dependency was produced on another rank, the consumer
// gets a Recv right before the action and the producer a Send right after the
// producing action: activations after F, gradients after B or I.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/schedule.h"

namespace ppbench {

struct Instr {
  enum class Kind : std::uint8_t { Compute, Send, Recv };
  Kind kind = Kind::Compute;
  Action action;  // Compute: what runs
  Task payload;   // Send / Recv: the task whose output crosses
  int peer = -1;  // Send: destination rank; Recv: source rank
};

struct Program {
  std::vector<std::vector<Instr>> ranks;
};

Program lower(const Schedule& s);

// Runs the programs with blocking receives matched by payload and sends that
// block while their channel (src -> dst) already holds `capacity` messages
// (0: unbounded). Throws InvalidSchedule naming a stuck rank and instruction and, where only the
// bound is at fault, a channel capacity that runs the programs.
void check_deadlock_free(const Schedule& s, const Program& program, int capacity = 0);

// The least channel capacity with which the programs run to their end (0: none, they deadlock
// even unbounded). Breadth-first orders need many: looped-bfs sends a whole chunk's activations
// before its peer takes the first.
int least_channel_capacity(const Schedule& s, const Program& program);

// The messages one rank-to-rank mailbox of the CPU transports holds unless told otherwise.
inline constexpr int kDefaultChannelCapacity = 4;
// The capacity a run of `s` gets by default: kDefaultChannelCapacity, or the least the schedule's
// lowered program needs where that is more (`s` must be sound with unbounded channels).
int default_channel_capacity(const Schedule& s);
// What a run of `s` asked for `requested` uses: `requested` where it is > 0, else
// default_channel_capacity(s). The library's options take 0 for "as `run` without
// --channel-capacity", so that a caller building its own options runs every sound schedule.
int resolve_channel_capacity(int requested, const Schedule& s);

std::string to_string(const Instr& i);
std::string to_text(const Program& p);

}  // namespace ppbench
