#include "harness/simulator.h"

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "core/large_buffer.h"
#include "schedules/deps.h"
#include "schedules/validate.h"

namespace ppbench {

namespace {

// Walks the schedule in dependency order, timing each action: `on_action(rank, position, action,
// start, end)` for every action and `on_transfer(producer rank, consumer rank, sent, arrived,
// task)` for every input that crosses ranks. `after(rank, position, end)` returns when the rank
// is done with the action: later than `end` where it runs other work right after it (an
// optimizer step), which delays both the rank and what the action sends. Only the end times of
// F and of B or I are kept (W has no dependents), one pair per (stage, micro-batch).
template <class OnAction, class OnTransfer, class After>
void timed_walk(const Schedule& s, const CostModel& costs, OnAction&& on_action,
                OnTransfer&& on_transfer, After&& after) {
  const Placement& p = s.placement;
  const TaskIndex index(p);
  // Left unfilled: the walk writes a task's end before any dependent reads it, and filling it
  // would touch every page (8 bytes per task) once more before the walk.
  const LargeBuffer<double> end(index.size() / 3 * 2);
  auto end_of = [&](std::size_t task_id) -> double& {
    return end[task_id / 3 * 2 + (task_id % 3 == 0 ? 0 : 1)];
  };
  std::vector<double> free_at(p.ranks, 0.0);

  auto stall = walk_in_dependency_order(s, index, [&](int r, std::size_t pos, const Action& a) {
    double start = free_at[r];
    std::array<TaskIndex::Dep, 2> deps;
    for (int half = 0; half < (a.paired() ? 2 : 1); ++half) {
      const Task& t = half == 0 ? a.task : a.partner;
      const int n = index.dependencies(t, deps);
      for (int k = 0; k < n; ++k) {
        const int producer = p.stage_rank[deps[k].stage];
        // A producer on this rank ran earlier in its order (the walk saw it done), so it ended
        // before the rank became free: only another rank's output can delay the start.
        if (producer == r) continue;
        const double sent = end_of(deps[k].id);
        const double arrive = sent + costs.comm(deps[k].stage, t.stage);
        on_transfer(producer, r, sent, arrive, deps[k].task());
        start = std::max(start, arrive);
      }
    }
    const double finish = start + costs.time(a);
    on_action(r, pos, a, start, finish);
    const double done = after(r, pos, finish);
    if (a.task.op != Op::W) end_of(index.id(a.task)) = done;
    if (a.paired()) end_of(index.id(a.partner)) = done;
    free_at[r] = done;
  });
  if (!stall.empty()) explain_stall(s, stall);
}

}  // namespace

Trace simulate(const Schedule& s, const CostModel& costs, const SimulateOptions& options) {
  const Placement& p = s.placement;
  Trace trace;
  trace.ranks = p.ranks;
  // Events go straight to their final slot: rank r's block starts at offset[r].
  std::vector<std::size_t> offset(p.ranks + 1, 0);
  for (int r = 0; r < p.ranks; ++r) offset[r + 1] = offset[r] + s.ranks[r].size();
  trace.compute.resize(offset[p.ranks]);
  // Each rank's optimizer steps in the order of their positions; the walk meets a rank's
  // positions in increasing order, so one cursor per rank finds them.
  std::vector<std::vector<OptimizerStep>> steps(p.ranks);
  for (const OptimizerStep& o : options.optimizer_steps) {
    if (o.rank < 0 || o.rank >= p.ranks || o.position >= s.ranks[o.rank].size() ||
        !(o.duration >= 0))
      throw std::invalid_argument("simulate: optimizer step of stage " + std::to_string(o.stage) +
                                  " at rank " + std::to_string(o.rank) + ", position " +
                                  std::to_string(o.position) + " is outside the schedule");
    steps[o.rank].push_back(o);
  }
  for (auto& list : steps)
    std::stable_sort(list.begin(), list.end(),
                     [](const auto& a, const auto& b) { return a.position < b.position; });
  std::vector<std::size_t> cursor(p.ranks, 0);
  timed_walk(
      s, costs,
      [&](int r, std::size_t pos, const Action& a, double start, double finish) {
        trace.compute[offset[r] + pos] = {r, start, finish, a};
      },
      [&](int from, int to, double sent, double arrived, const Task& t) {
        if (options.record_comm) trace.comm.push_back({from, to, sent, arrived, t});
      },
      [&](int r, std::size_t pos, double end) {
        const auto& list = steps[r];
        for (std::size_t& k = cursor[r]; k < list.size() && list[k].position == pos; ++k) {
          trace.updates.push_back({r, end, end + list[k].duration, list[k].stage});
          end += list[k].duration;
        }
        return end;
      });
  return trace;
}

Metrics simulate_metrics(const Schedule& s, const CostModel& costs) {
  MetricsStream stream(s.placement, s.placement.ranks);
  timed_walk(
      s, costs,
      [&](int r, std::size_t, const Action& a, double start, double finish) {
        stream.add(r, start, finish, a);
      },
      [](int, int, double, double, const Task&) {},
      [](int, std::size_t, double end) { return end; });
  return stream.finish();
}

}  // namespace ppbench
