// Dependencies between tasks and a walk of the per-rank orders in dependency
// order, shared by the validator (does every rank finish?) and the simulator
// (when does every action start?).
//
// The IR's rules (docs/schedules.md): F after the previous stage's F; B or I after its own F
// and after the next stage's B or I; W after its own I.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/large_buffer.h"
#include "schedules/placement.h"
#include "schedules/schedule.h"

namespace ppbench {

// Dense ids for (op, stage, micro-batch). B and I share a slot: either one is
// "the input gradient of (stage, mb) is ready", which is what the previous
// stage waits for.
class TaskIndex {
 public:
  explicit TaskIndex(const Placement& p);

  static int slot(Op op) { return op == Op::F ? 0 : (op == Op::W ? 2 : 1); }
  std::size_t id(Op op, int stage, int mb) const {
    return (base_[stage] + static_cast<std::size_t>(mb)) * 3 + slot(op);
  }
  std::size_t id(const Task& t) const { return id(t.op, t.stage, t.mb); }
  std::size_t size() const { return size_; }

  // A dependency: its slot id, and the (op, stage, mb) it stands for. Kept as plain fields
  // rather than a Task, whose packed stage would cost every walk a partial store and reload.
  struct Dep {
    std::size_t id;
    int stage;
    Op op;
    int mb;
    Task task() const { return Task(op, stage, mb); }
  };
  // The tasks `t` waits for (at most two); returns how many were written.
  // Inline: it runs several times per action in every walk.
  int dependencies(const Task& t, std::array<Dep, 2>& out) const {
    const int stage = t.stage, mb = t.mb;
    int n = 0;
    switch (t.op) {
      case Op::F:
        if (!is_first(stage)) out[n++] = {id(Op::F, stage - 1, mb), stage - 1, Op::F, mb};
        break;
      case Op::B:
      case Op::I:
        out[n++] = {id(Op::F, stage, mb), stage, Op::F, mb};
        // Whichever of B or I the next stage runs; both fill the same slot.
        if (!is_last(stage)) out[n++] = {id(Op::B, stage + 1, mb), stage + 1, Op::B, mb};
        break;
      case Op::W:
        out[n++] = {id(Op::I, stage, mb), stage, Op::I, mb};
        break;
    }
    return n;
  }

  // Placement::is_first / is_last, from one byte per stage (the walks ask for every action).
  bool is_first(int stage) const { return ends_[stage] & 1; }
  bool is_last(int stage) const { return ends_[stage] & 2; }

 private:
  std::vector<std::size_t> base_;   // stage -> first (stage, mb) row
  std::vector<std::uint8_t> ends_;  // stage -> 1 if first of its chain | 2 if last
  std::size_t size_ = 0;
};

// Where a walk got stuck: the first action of `rank` that could not run, and
// a task it waits for that never ran.
struct Stall {
  int rank;
  std::size_t position;
  Action action;
  Task waiting_for;
};

// Runs `on_action(rank, position, action)` for every action once all of its
// dependencies have run, each rank in its own order. Returns one stall per
// rank that can never continue (a deadlock or a dependency the order breaks);
// empty when every rank finished.
// Requires a structurally valid schedule (every task once, stages in range).
//
// Memory: one byte per task slot (done or not). A rank that waits is not
// listed under the task it waits for: a task's only dependent on another rank
// is on the next stage (after an F) or the previous one (after a B or I), so
// finishing it wakes that rank, which checks its next action again. The walk
// is linear in the number of actions and keeps nothing per action.
template <class OnAction>
std::vector<Stall> walk_in_dependency_order(const Schedule& s, const TaskIndex& index,
                                            OnAction&& on_action) {
  const Placement& p = s.placement;
  const int ranks = static_cast<int>(s.ranks.size());
  const LargeBuffer<std::uint8_t> done(index.size(), 0);
  std::vector<std::size_t> next(ranks, 0);
  std::vector<std::uint8_t> waiting(ranks, 0);  // blocked and not in `ready`
  std::vector<std::int32_t> ready;
  ready.reserve(ranks);
  for (int r = ranks - 1; r >= 0; --r) ready.push_back(r);

  auto blocked_on = [&](const Action& a) -> std::optional<TaskIndex::Dep> {
    std::array<TaskIndex::Dep, 2> deps;
    for (int half = 0; half < (a.paired() ? 2 : 1); ++half) {
      int n = index.dependencies(half == 0 ? a.task : a.partner, deps);
      for (int k = 0; k < n; ++k)
        if (!done[deps[k].id]) return deps[k];
    }
    return std::nullopt;
  };
  auto wake = [&](int stage) {
    const int q = p.stage_rank[stage];
    if (waiting[q]) {
      waiting[q] = 0;
      ready.push_back(q);
    }
  };

  while (!ready.empty()) {
    const int r = ready.back();
    ready.pop_back();
    const auto& actions = s.ranks[r];
    std::size_t& at = next[r];
    while (at < actions.size()) {
      // A rank runs about one action per visit in the steady state, and a visit to every other
      // rank comes between two of its own: ask for its next actions' cache line now, so that
      // they are in cache when the walk comes back (the walk is memory-bound without it).
      __builtin_prefetch(actions.data() + std::min(at + 8, actions.size() - 1));
      const Action& a = actions[at];
      if (blocked_on(a)) {
        waiting[r] = 1;
        break;
      }
      on_action(r, at, a);
      ++at;
      for (int half = 0; half < (a.paired() ? 2 : 1); ++half) {
        const Task& t = half == 0 ? a.task : a.partner;
        done[index.id(t)] = 1;
        if (t.op == Op::F) {
          if (!index.is_last(t.stage)) wake(t.stage + 1);
        } else if (t.op != Op::W && !index.is_first(t.stage)) {
          wake(t.stage - 1);
        }
      }
    }
  }
  std::vector<Stall> stalls;
  for (int r = 0; r < ranks; ++r)
    if (next[r] < s.ranks[r].size()) {
      const Action& a = s.ranks[r][next[r]];
      stalls.push_back({r, next[r], a, blocked_on(a)->task()});
    }
  return stalls;
}

}  // namespace ppbench
