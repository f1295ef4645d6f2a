#include "harness/simulator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/large_buffer.h"
#include "schedules/deps.h"
#include "schedules/validate.h"

namespace ppbench {

namespace {

// What a timed walk reports besides each action: nothing (the metrics alone), or each input
// that crosses ranks (a trace's arrows).
struct NoTransfers {};

// Walks the schedule in dependency order, timing each action: `on_action(rank, position, action,
// start, end)` for every action and, unless it is NoTransfers, `on_transfer(producer rank,
// consumer rank, sent, arrived, task)` for every input that crosses ranks. `after(rank, position,
// end)` returns when the rank is done with the action: later than `end` where it runs other work
// right after it (an optimizer step), which delays both the rank and what the action sends.
template <class OnAction, class OnTransfer, class After>
void timed_walk(const Schedule& s, const CostModel& costs, OnAction&& on_action,
                OnTransfer&& on_transfer, After&& after) {
  const Placement& p = s.placement;
  const TaskIndex index(p);
  // When each task's output is ready, NaN until it has run: this is also the walk's record of
  // what has run. Only F and B or I have dependents, so two slots per (stage, micro-batch).
  const LargeBuffer<double> end(index.rows() * 2, std::numeric_limits<double>::quiet_NaN());
  auto end_of = [&](std::size_t row, int slot) -> double& { return end[row * 2 + slot]; };
  // The delay from a dependency's end to a task's start, by where the dependency lives: the
  // previous stage, the task's own stage, or the next stage. It is 0 for a producer on the task's
  // own rank: that producer ran earlier in the rank's order, so it ended before the rank became
  // free and cannot hold the start back.
  std::vector<std::array<double, 3>> delay(p.stages(), {0.0, 0.0, 0.0});
  for (int st = 0; st < p.stages(); ++st) {
    // A NaN end would read as "has not run": the walk would report a deadlock instead.
    const StageCost& c = costs.stages().at(st);
    if (!std::isfinite(c.f + c.b + c.i + c.w + c.fb + c.comm))
      throw std::invalid_argument("simulate: the costs of stage " + std::to_string(st) +
                                  " are not all finite");
    if (!index.is_first(st) && p.stage_rank[st - 1] != p.stage_rank[st])
      delay[st][0] = costs.comm(st - 1, st);
    if (!index.is_last(st) && p.stage_rank[st + 1] != p.stage_rank[st])
      delay[st][2] = costs.comm(st, st + 1);
  }
  std::vector<double> free_at(p.ranks, 0.0);

  auto try_run = [&](int r, std::size_t pos, const Action& a) {
    double start = free_at[r];
    auto wait_for = [&](const Task& t) {
      return index.for_each_dependency(t, [&](const TaskIndex::Dep& d) {
        const double ready = end_of(d.row, d.slot);
        if (std::isnan(ready)) return false;
        start = std::max(start, ready + delay[t.stage][d.stage - t.stage + 1]);
        return true;
      });
    };
    if (!wait_for(a.task) || (a.paired() && !wait_for(a.partner))) return false;
    if constexpr (!std::is_same_v<std::decay_t<OnTransfer>, NoTransfers>) {
      for (int half = 0; half < (a.paired() ? 2 : 1); ++half) {
        const Task& t = half == 0 ? a.task : a.partner;
        index.for_each_dependency(t, [&](const TaskIndex::Dep& d) {
          const int producer = p.stage_rank[d.stage];
          const double sent = end_of(d.row, d.slot);
          if (producer != r)
            on_transfer(producer, r, sent, sent + costs.comm(d.stage, t.stage), d.task());
          return true;
        });
      }
    }
    const double finish = start + costs.time(a);
    on_action(r, pos, a, start, finish);
    const double done = after(r, pos, finish);
    for (int half = 0; half < (a.paired() ? 2 : 1); ++half) {
      const Task& t = half == 0 ? a.task : a.partner;
      if (t.op != Op::W) end_of(index.row(t.stage, t.mb), TaskIndex::slot(t.op)) = done;
    }
    free_at[r] = done;
    return true;
  };
  auto ran = [&](const TaskIndex::Dep& d) { return !std::isnan(end_of(d.row, d.slot)); };
  auto stall = walk_in_dependency_order(s, index, try_run, ran);
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
  auto record_action = [&](int r, std::size_t pos, const Action& a, double start, double finish) {
    trace.compute[offset[r] + pos] = {r, start, finish, a};
  };
  auto record_transfer = [&](int from, int to, double sent, double arrived, const Task& t) {
    trace.comm.push_back({from, to, sent, arrived, t});
  };
  auto run_updates = [&](int r, std::size_t pos, double end) {
    const auto& list = steps[r];
    for (std::size_t& k = cursor[r]; k < list.size() && list[k].position == pos; ++k) {
      trace.updates.push_back({r, end, end + list[k].duration, list[k].stage});
      end += list[k].duration;
    }
    return end;
  };
  if (options.record_comm)
    timed_walk(s, costs, record_action, record_transfer, run_updates);
  else
    timed_walk(s, costs, record_action, NoTransfers{}, run_updates);
  return trace;
}

Metrics simulate_metrics(const Schedule& s, const CostModel& costs) {
  MetricsStream stream(s.placement, s.placement.ranks);
  timed_walk(
      s, costs,
      [&](int r, std::size_t, const Action& a, double start, double finish) {
        stream.add(r, start, finish, a);
      },
      NoTransfers{}, [](int, std::size_t, double end) { return end; });
  return stream.finish();
}

}  // namespace ppbench
