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
#include <vector>

#include "schedules/placement.h"
#include "schedules/schedule.h"

namespace ppbench {

// Dense ids for (op, stage, micro-batch). A (stage, micro-batch) is a row; its slots are F, the
// input gradient (B and I share it: either one is "the input gradient of (stage, mb) is ready",
// which is what the previous stage waits for) and W. id = row * 3 + slot.
class TaskIndex {
 public:
  explicit TaskIndex(const Placement& p);

  static int slot(Op op) { return op == Op::F ? 0 : (op == Op::W ? 2 : 1); }
  std::size_t row(int stage, int mb) const {
    return stages_[stage].base + static_cast<std::size_t>(mb);
  }
  std::size_t id(Op op, int stage, int mb) const { return row(stage, mb) * 3 + slot(op); }
  std::size_t id(const Task& t) const { return id(t.op, t.stage, t.mb); }
  std::size_t rows() const { return rows_; }
  std::size_t size() const { return rows_ * 3; }

  // A dependency: its row and slot, and the (op, stage, mb) it stands for. Kept as plain fields
  // rather than a Task, whose packed stage would cost every walk a partial store and reload.
  struct Dep {
    std::size_t row;
    int slot;
    int stage;
    Op op;
    int mb;
    std::size_t id() const { return row * 3 + static_cast<std::size_t>(slot); }
    Task task() const { return Task(op, stage, mb); }
  };
  // Calls `f(dep)` for each task `t` waits for (at most two) while f returns true; returns false
  // as soon as f does. The walks call it for every action they try, so it is inline and writes
  // nothing: the callers' lambdas fold into it.
  template <class F>
  bool for_each_dependency(const Task& t, F&& f) const {
    const int stage = t.stage, mb = t.mb;
    switch (t.op) {
      case Op::F:
        return is_first(stage) || f(Dep{row(stage - 1, mb), 0, stage - 1, Op::F, mb});
      case Op::B:
      case Op::I:
        // Whichever of B or I the next stage runs; both fill the same slot.
        return f(Dep{row(stage, mb), 0, stage, Op::F, mb}) &&
               (is_last(stage) || f(Dep{row(stage + 1, mb), 1, stage + 1, Op::B, mb}));
      case Op::W:
        return f(Dep{row(stage, mb), 1, stage, Op::I, mb});
    }
    return true;
  }
  // The same dependencies, written to `out`; returns how many.
  int dependencies(const Task& t, std::array<Dep, 2>& out) const {
    int n = 0;
    for_each_dependency(t, [&](const Dep& d) {
      out[n++] = d;
      return true;
    });
    return n;
  }

  // Placement::is_first / is_last, from the stage's own entry (the walks ask for every action).
  bool is_first(int stage) const { return stages_[stage].ends & 1; }
  bool is_last(int stage) const { return stages_[stage].ends & 2; }
  // Placement::stage_rank and microbatches_of, beside them.
  int rank_of(int stage) const { return stages_[stage].rank; }
  int microbatches_of(int stage) const { return stages_[stage].microbatches; }
  int stages() const { return static_cast<int>(stages_.size()); }

 private:
  struct Stage {
    std::size_t base;           // its first row
    std::int32_t rank;          // where it runs
    std::int32_t microbatches;  // how many it carries
    std::uint8_t ends;          // 1 if first of its chain | 2 if last
  };
  std::vector<Stage> stages_;
  std::size_t rows_ = 0;
};

// Where a walk got stuck: the first action of `rank` that could not run, and
// a task it waits for that never ran.
struct Stall {
  int rank;
  std::size_t position;
  Action action;
  Task waiting_for;
};

// The stall of every rank whose position `next[r]` is short of its order's end, for a walk that
// stopped there: its action there and a dependency of it that has not run (`done`).
template <class Done>
std::vector<Stall> stalls_at(const Schedule& s, const TaskIndex& index,
                             const std::vector<std::size_t>& next, Done&& done) {
  std::vector<Stall> stalls;
  for (int r = 0; r < static_cast<int>(s.ranks.size()); ++r)
    if (next[r] < s.ranks[r].size()) {
      const Action& a = s.ranks[r][next[r]];
      Task missing;
      for (const Task& t : a.tasks())
        if (!index.for_each_dependency(t, [&](const TaskIndex::Dep& d) {
              if (done(d)) return true;
              missing = d.task();
              return false;
            }))
          break;
      stalls.push_back({r, next[r], a, missing});
    }
  return stalls;
}

// Calls `wake(stage)` for each neighbour stage whose tasks may depend on the tasks of `a` (the
// next stage after an F, the previous one after a B or I; a W has no dependents): after `a`
// has run, the rank holding that stage may be able to continue.
template <class Wake>
void wake_dependents(const TaskIndex& index, const Action& a, Wake&& wake) {
  for (const Task& t : a.tasks()) {
    if (t.op == Op::F) {
      if (!index.is_last(t.stage)) wake(t.stage + 1);
    } else if (t.op != Op::W && !index.is_first(t.stage)) {
      wake(t.stage - 1);
    }
  }
}

// Runs every rank's order in dependency order. `try_run(rank, position, action)` runs the action
// and returns true when every task it depends on has run, or returns false and leaves it for
// later; `done(dep)` says whether a dependency has run (to name what a stuck rank waits for).
// Returns one stall per rank that can never continue (a deadlock or a dependency the order
// breaks); empty when every rank finished. Requires a structurally valid schedule (every task
// once, stages in range).
//
// The caller keeps what "has run" means (a flag, or an end time): the walk keeps only each
// rank's position. A rank that waits is not listed under the task it waits for: a task's only
// dependent on another rank is on the next stage (after an F) or the previous one (after a B or
// I), so finishing it wakes that rank, which tries its next action again. The walk is linear in
// the number of actions.
template <class TryRun, class Done>
std::vector<Stall> walk_in_dependency_order(const Schedule& s, const TaskIndex& index,
                                            TryRun&& try_run, Done&& done) {
  const int ranks = static_cast<int>(s.ranks.size());
  std::vector<std::size_t> next(ranks, 0);
  std::vector<std::uint8_t> waiting(ranks, 0);  // blocked and not in `ready`
  std::vector<std::int32_t> ready;
  ready.reserve(ranks);
  for (int r = ranks - 1; r >= 0; --r) ready.push_back(r);

  auto wake = [&](int stage) {
    const int q = index.rank_of(stage);
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
      if (!try_run(r, at, a)) {
        waiting[r] = 1;
        break;
      }
      ++at;
      wake_dependents(index, a, wake);
    }
  }
  return stalls_at(s, index, next, done);
}

}  // namespace ppbench
