// Where each stage's backward ends on a rank: the last action that runs a B, I or W of the stage
// (alone or as half of an overlapped pair). The stage's gradients are final there, which is where
// both executors step its optimizer and start its data-parallel all-reduce, and where the
// simulator places a measured profile's update.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "schedules/action.h"

namespace ppbench {

// (index, stage) per stage with a backward, in the order of each stage's first backward, over a
// rank's sequence of `size` elements: `action_at(i)` is the i-th element's action, or nullptr
// where the element is none (a send or receive of a lowered program, a group of NCCL ops).
template <class ActionAt>
std::vector<std::pair<std::size_t, int>> stage_last_backwards(std::size_t size,
                                                              ActionAt action_at) {
  std::vector<std::pair<std::size_t, int>> last;
  auto note = [&last](std::size_t i, const Task& t) {
    if (t.op == Op::F) return;
    for (auto& [at, stage] : last)
      if (stage == t.stage) {
        at = i;
        return;
      }
    last.emplace_back(i, t.stage);
  };
  for (std::size_t i = 0; i < size; ++i) {
    const Action* a = action_at(i);
    if (a == nullptr) continue;
    note(i, a->task);
    if (a->paired()) note(i, a->partner);
  }
  return last;
}

}  // namespace ppbench
