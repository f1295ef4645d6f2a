#include "harness/simulator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <queue>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/large_buffer.h"
#include "schedules/deps.h"
#include "schedules/validate.h"

namespace ppbench {

namespace {

// What a timed walk reports besides each action: nothing (the metrics alone), or each input
// that crosses ranks (a trace's arrows).
struct NoTransfers {};

// The timing of single actions, which both walks below share: when an action's inputs let it
// start, and what running it records. `on_action(rank, position, action, start, end)` is called
// for every action and, unless it is NoTransfers, `on_transfer(producer rank, consumer rank,
// sent, arrived, task)` for every input that crosses ranks. `after(rank, position, end)` returns
// when the rank is done with the action: later than `end` where it runs other work right after it
// (an optimizer step), which delays both the rank and what the action sends.
template <class OnAction, class OnTransfer, class After>
class ActionTiming {
 public:
  ActionTiming(const Schedule& s, const CostModel& costs, OnAction& on_action,
               OnTransfer& on_transfer, After& after)
      : p_(s.placement),
        costs_(costs),
        index_(p_),
        end_(index_.rows() * 2, std::numeric_limits<double>::quiet_NaN()),
        delay_(p_.stages(), {0.0, 0.0, 0.0}),
        receive_(p_.stages(), {0.0, 0.0, 0.0}),
        free_at_(p_.ranks, 0.0),
        on_action_(on_action),
        on_transfer_(on_transfer),
        after_(after) {
    for (int st = 0; st < p_.stages(); ++st) {
      // A NaN end would read as "has not run": the walk would report a deadlock instead.
      const StageCost& c = costs.stages().at(st);
      if (!std::isfinite(c.f + c.b + c.i + c.w + c.fb + c.comm + c.recv))
        throw std::invalid_argument("simulate: the costs of stage " + std::to_string(st) +
                                    " are not all finite");
      if (!index_.is_first(st) && p_.stage_rank[st - 1] != p_.stage_rank[st]) {
        delay_[st][0] = costs.comm(st - 1, st);
        receive_[st][0] = costs.recv(st);
      }
      if (!index_.is_last(st) && p_.stage_rank[st + 1] != p_.stage_rank[st]) {
        delay_[st][2] = costs.comm(st, st + 1);
        receive_[st][2] = costs.recv(st);
      }
    }
  }

  const TaskIndex& index() const { return index_; }

  // Whether every input of rank r's action `a` has run; if so, `start` is when the action could
  // start (its rank free, its inputs arrived, and then taken in one after another).
  bool inputs_ready(int r, const Action& a, double& start) const {
    start = free_at_[r];
    double taking_in = 0;
    auto wait_for = [&](const Task& t) {
      return index_.for_each_dependency(t, [&](const TaskIndex::Dep& d) {
        const double ready = end_of(d.row, d.slot);
        if (std::isnan(ready)) return false;
        const int side = d.stage - t.stage + 1;
        start = std::max(start, ready + delay_[t.stage][side]);
        taking_in += receive_[t.stage][side];
        return true;
      });
    };
    const bool ready = wait_for(a.task) && (!a.paired() || wait_for(a.partner));
    start += taking_in;
    return ready;
  }

  // Runs rank r's action `a` (at `pos` in its order) from `start`; returns when the rank is done
  // with it.
  double run(int r, std::size_t pos, const Action& a, double start) {
    if constexpr (!std::is_same_v<OnTransfer, NoTransfers>) {
      for (int half = 0; half < (a.paired() ? 2 : 1); ++half) {
        const Task& t = half == 0 ? a.task : a.partner;
        index_.for_each_dependency(t, [&](const TaskIndex::Dep& d) {
          const int producer = p_.stage_rank[d.stage];
          const double sent = end_of(d.row, d.slot);
          if (producer != r)
            on_transfer_(producer, r, sent, sent + costs_.comm(d.stage, t.stage), d.task());
          return true;
        });
      }
    }
    const double finish = start + costs_.time(a);
    on_action_(r, pos, a, start, finish);
    const double done = after_(r, pos, finish);
    for (int half = 0; half < (a.paired() ? 2 : 1); ++half) {
      const Task& t = half == 0 ? a.task : a.partner;
      if (t.op != Op::W) end_of(index_.row(t.stage, t.mb), TaskIndex::slot(t.op)) = done;
    }
    free_at_[r] = done;
    return done;
  }

  bool ran(const TaskIndex::Dep& d) const { return !std::isnan(end_of(d.row, d.slot)); }

 private:
  // When each task's output is ready, NaN until it has run: this is also the walk's record of
  // what has run. Only F and B or I have dependents, so two slots per (stage, micro-batch).
  double& end_of(std::size_t row, int slot) const { return end_[row * 2 + slot]; }

  const Placement& p_;
  const CostModel& costs_;
  const TaskIndex index_;
  const LargeBuffer<double> end_;
  // The delay from a dependency's end to a task's start, by where the dependency lives: the
  // previous stage, the task's own stage, or the next stage. It is 0 for a producer on the task's
  // own rank: that producer ran earlier in the rank's order, so it ended before the rank became
  // free and cannot hold the start back.
  std::vector<std::array<double, 3>> delay_;
  // By the same sides, what the consumer spends taking in an input from another rank (0 on its
  // own rank): after the later of its rank being free and the input's arrival.
  std::vector<std::array<double, 3>> receive_;
  std::vector<double> free_at_;
  OnAction& on_action_;
  OnTransfer& on_transfer_;
  After& after_;
};

// A device per rank: an action starts as soon as its rank is free and its inputs have arrived,
// so one walk in dependency order times it (linear in the actions).
template <class Timing>
std::vector<Stall> walk_with_a_device_per_rank(const Schedule& s, Timing& timing) {
  auto try_run = [&](int r, std::size_t pos, const Action& a) {
    double start;
    if (!timing.inputs_ready(r, a, start)) return false;
    timing.run(r, pos, a, start);
    return true;
  };
  return walk_in_dependency_order(s, timing.index(), try_run,
                                  [&](const TaskIndex::Dep& d) { return timing.ran(d); });
}

// Ranks that share `cores` cores: each rank's next action enters a queue once its inputs have
// run, keyed by when it could start, and the queue's earliest action (the lower rank on a tie)
// takes the core that frees first, until its rank is done with it. An action's dependents become
// ready no earlier than it ends, so the queue is served in order of readiness.
template <class Timing>
std::vector<Stall> walk_on_shared_cores(const Schedule& s, Timing& timing, int cores) {
  const TaskIndex& index = timing.index();
  const int ranks = static_cast<int>(s.ranks.size());
  std::vector<std::size_t> next(ranks, 0);
  std::vector<std::uint8_t> waiting(ranks, 0);  // its next action lacks an input
  using Entry = std::pair<double, int>;         // (ready, rank), earliest first, then lowest rank
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  std::priority_queue<double, std::vector<double>, std::greater<>> core_free;
  for (int c = 0; c < cores; ++c) core_free.push(0.0);
  auto offer = [&](int r) {
    if (next[r] >= s.ranks[r].size()) return;
    double ready;
    waiting[r] = !timing.inputs_ready(r, s.ranks[r][next[r]], ready);
    if (!waiting[r]) queue.push({ready, r});
  };
  for (int r = 0; r < ranks; ++r) offer(r);
  while (!queue.empty()) {
    const auto [ready, r] = queue.top();
    queue.pop();
    const double core = core_free.top();
    core_free.pop();
    const Action& a = s.ranks[r][next[r]];
    core_free.push(timing.run(r, next[r], a, std::max(ready, core)));
    ++next[r];
    offer(r);
    wake_dependents(index, a, [&](int stage) {
      const int q = index.rank_of(stage);
      if (waiting[q]) offer(q);
    });
  }
  return stalls_at(s, index, next, [&](const TaskIndex::Dep& d) { return timing.ran(d); });
}

// Times every action of the schedule (ActionTiming's callbacks), on a device per rank or, with
// `cores` short of the ranks, on that many shared cores. Each walk times with its own
// ActionTiming: one that no other code can reach lets the compiler keep the plain walk's state
// in registers (sharing one cost the plain walk 7 %).
template <class OnAction, class OnTransfer, class After>
void timed_walk(const Schedule& s, const CostModel& costs, int cores, OnAction&& on_action,
                OnTransfer&& on_transfer, After&& after) {
  using Timing = ActionTiming<std::remove_reference_t<OnAction>,
                              std::remove_reference_t<OnTransfer>, std::remove_reference_t<After>>;
  if (cores < 0) throw std::invalid_argument("simulate: a negative number of cores");
  std::vector<Stall> stall;
  if (cores == 0 || cores >= s.placement.ranks) {
    Timing timing(s, costs, on_action, on_transfer, after);
    stall = walk_with_a_device_per_rank(s, timing);
  } else {
    Timing timing(s, costs, on_action, on_transfer, after);
    stall = walk_on_shared_cores(s, timing, cores);
  }
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
    timed_walk(s, costs, options.cores, record_action, record_transfer, run_updates);
  else
    timed_walk(s, costs, options.cores, record_action, NoTransfers{}, run_updates);
  return trace;
}

Metrics simulate_metrics(const Schedule& s, const CostModel& costs, int cores) {
  MetricsStream stream(s.placement, s.placement.ranks);
  timed_walk(
      s, costs, cores,
      [&](int r, std::size_t, const Action& a, double start, double finish) {
        stream.add(r, start, finish, a);
      },
      NoTransfers{}, [](int, std::size_t, double end) { return end; });
  return stream.finish();
}

}  // namespace ppbench
