#include "harness/simulator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
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
// start, and what running it records. `on_action(rank, position, action, start, end, send,
// sends)` is called for every action (`sends` of its outputs cross ranks, costing its rank `send`
// in all) and, unless it is NoTransfers, `on_transfer(producer rank, consumer rank, sent, arrived,
// task)` for every input that crosses ranks. An action's outputs leave as it ends; its rank then
// spends StageCost::send sending them, and `after(rank, position, sent)` returns when the rank is
// done with the action: later than `sent` where it runs other work after the sends (an optimizer
// step, as both executors run a stage's update once its last backward's outputs are sent), which
// delays the rank but not what the action sent.
//
// With `kRendezvous`, an input on a boundary whose hand-overs go by rendezvous is ready when it
// has arrived (arrive(), as walk_with_rendezvous times it), not a fixed delay after its producer.
template <class OnAction, class OnTransfer, class After, bool kRendezvous = false>
class ActionTiming {
 public:
  ActionTiming(const Schedule& s, const CostModel& costs, OnAction& on_action,
               OnTransfer& on_transfer, After& after)
      : p_(s.placement),
        costs_(costs),
        index_(p_),
        end_(index_.rows() * 2, std::numeric_limits<double>::quiet_NaN()),
        arrival_(kRendezvous ? index_.rows() * 2 : 0, std::numeric_limits<double>::quiet_NaN()),
        delay_(p_.stages(), {0.0, 0.0, 0.0}),
        receive_(p_.stages(), {0.0, 0.0, 0.0}),
        handshake_(p_.stages(), {-1.0, -1.0, -1.0}),
        send_(p_.stages(), {-1.0, -1.0}),
        free_at_(p_.ranks, 0.0),
        on_action_(on_action),
        on_transfer_(on_transfer),
        after_(after) {
    for (int st = 0; st < p_.stages(); ++st) {
      // A NaN end would read as "has not run": the walk would report a deadlock instead.
      const StageCost& c = costs.stages().at(st);
      if (!std::isfinite(c.f + c.b + c.i + c.w + c.fb + c.comm + c.recv + c.handshake + c.send))
        throw std::invalid_argument("simulate: the costs of stage " + std::to_string(st) +
                                    " are not all finite");
      if (!index_.is_first(st) && p_.stage_rank[st - 1] != p_.stage_rank[st]) {
        delay_[st][0] = costs.comm(st - 1, st);
        receive_[st][0] = costs.recv(st);
        handshake_[st][0] = costs.handshake(st - 1, st);
        send_[st][1] = costs.send(st, st - 1);
      }
      if (!index_.is_last(st) && p_.stage_rank[st + 1] != p_.stage_rank[st]) {
        delay_[st][2] = costs.comm(st, st + 1);
        receive_[st][2] = costs.recv(st);
        handshake_[st][2] = costs.handshake(st, st + 1);
        send_[st][0] = costs.send(st, st + 1);
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
        const double arrived = arrival(t, d);  // NaN until its producer has run and sent it
        if (std::isnan(arrived)) return false;
        start = std::max(start, arrived);
        taking_in += receive_[t.stage][d.stage - t.stage + 1];
        return true;
      });
    };
    const bool ready = wait_for(a.task) && (!a.paired() || wait_for(a.partner));
    start += taking_in;
    return ready;
  }

  // When a run action's outputs leave its rank, when the rank has sent them (and begins any
  // update after the action), and when the rank is free again.
  struct Ran {
    double done;
    double sent;
    double free;
  };

  // Runs rank r's action `a` (at `pos` in its order) from `start`.
  Ran run(int r, std::size_t pos, const Action& a, double start) {
    if constexpr (!std::is_same_v<OnTransfer, NoTransfers>) {
      for (const Task& t : a.tasks()) {
        index_.for_each_dependency(t, [&](const TaskIndex::Dep& d) {
          const int producer = p_.stage_rank[d.stage];
          if (producer == r) return true;
          on_transfer_(producer, r, end_of(d.row, d.slot), arrival(t, d), d.task());
          return true;
        });
      }
    }
    const double finish = start + costs_.time(a);
    double sending = 0;
    int sends = 0;
    for (const Task& t : a.tasks()) {
      if (t.op == Op::W) continue;
      const double cost = send_[t.stage][TaskIndex::slot(t.op)];
      if (cost >= 0) sending += cost, ++sends;
    }
    on_action_(r, pos, a, start, finish, sending, sends);
    for (const Task& t : a.tasks()) {
      if (t.op != Op::W) end_of(index_.row(t.stage, t.mb), TaskIndex::slot(t.op)) = finish;
    }
    const double sent = finish + sending;
    free_at_[r] = after_(r, pos, sent);
    return {finish, sent, free_at_[r]};
  }

  bool ran(const TaskIndex::Dep& d) const { return !std::isnan(end_of(d.row, d.slot)); }

  // Where output `slot` (0: F, 1: B or I) of (stage, row) goes to another rank: its consumer's
  // stage, the side it arrives on there (as delay_ counts them) and whether by rendezvous.
  struct Destination {
    int stage = -1;  // -1: no consumer on another rank
    int side = 0;
    bool rendezvous = false;
  };
  Destination destination(int stage, int slot) const {
    if (slot == 0 ? index_.is_last(stage) : index_.is_first(stage)) return {};
    const int to = slot == 0 ? stage + 1 : stage - 1;
    if (p_.stage_rank[to] == p_.stage_rank[stage]) return {};
    const int side = slot == 0 ? 0 : 2;
    return {to, side, handshake_[to][side] >= 0};
  }
  double handshake(const Destination& d) const { return handshake_[d.stage][d.side]; }
  double delay(const Destination& d) const { return delay_[d.stage][d.side]; }
  // When input `d` of task `t` is (or will be) at t's rank, its producer's end where that is
  // t's own rank; NaN while not known (its producer has not run, or its rendezvous has not
  // delivered it).
  double arrival(const Task& t, const TaskIndex::Dep& d) const {
    const int side = d.stage - t.stage + 1;
    if (kRendezvous && handshake_[t.stage][side] >= 0) return arrival_of(d.row, d.slot);
    return end_of(d.row, d.slot) + delay_[t.stage][side];
  }
  // A rendezvous hand-over's tensor arrived at its consumer's rank at `time`.
  void arrive(std::size_t row, int slot, double time) { arrival_[row * 2 + slot] = time; }

 private:
  // When each task's output is ready, NaN until it has run: this is also the walk's record of
  // what has run. Only F and B or I have dependents, so two slots per (stage, micro-batch).
  double& end_of(std::size_t row, int slot) const { return end_[row * 2 + slot]; }
  double arrival_of(std::size_t row, int slot) const { return arrival_[row * 2 + slot]; }

  const Placement& p_;
  const CostModel& costs_;
  const TaskIndex index_;
  const LargeBuffer<double> end_;
  // With kRendezvous: when each output that crossed by rendezvous arrived, NaN until then.
  LargeBuffer<double> arrival_;
  // The delay from a dependency's end to a task's start, by where the dependency lives: the
  // previous stage, the task's own stage, or the next stage. It is 0 for a producer on the task's
  // own rank: that producer ran earlier in the rank's order, so it ended before the rank became
  // free and cannot hold the start back.
  std::vector<std::array<double, 3>> delay_;
  // By the same sides, what the consumer spends taking in an input from another rank (0 on its
  // own rank): after the later of its rank being free and the input's arrival.
  std::vector<std::array<double, 3>> receive_;
  // By the same sides, the handshake of a rendezvous hand-over, -1 where hand-overs are eager
  // (and on the task's own rank).
  std::vector<std::array<double, 3>> handshake_;
  // What the producer spends sending each output (by slot: 0 an activation, 1 a gradient) to
  // another rank; -1 where the consumer is on its own rank (or there is none).
  std::vector<std::array<double, 2>> send_;
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
    core_free.push(timing.run(r, next[r], a, std::max(ready, core)).free);
    ++next[r];
    offer(r);
    wake_dependents(index, a, [&](int stage) {
      const int q = index.rank_of(stage);
      if (waiting[q]) offer(q);
    });
  }
  return stalls_at(s, index, next, [&](const TaskIndex::Dep& d) { return timing.ran(d); });
}

// Hand-overs by rendezvous (StageCost::rendezvous): when a tensor leaves depends on what its
// producer's rank is doing when the receiver's answer reaches it, so the walk follows the step in
// time order, one event at a time:
//   announce  the producer's action has ended: the announcement reaches the consumer's rank one
//             handshake later;
//   ask       once announced, the consumer's rank free at the action that needs the tensor and
//             that action's earlier inputs from other ranks in hand (the executor receives them
//             one after another), it answers: the answer reaches the producer's rank one
//             handshake later;
//   ack       if that rank is inside an action or an update then, the tensor leaves when that
//             ends, otherwise at once (sending an action's outputs, StageCost::send, the rank is
//             inside MPI); it arrives `comm` later;
//   arrive    the consumer's rank may start its action, as ActionTiming::inputs_ready says.
// A rank starts its next action as soon as all its inputs have arrived (an eager input's arrival
// is known as its producer ends), so it is busy from that start to its end; an answer that comes
// earlier finds it waiting, inside MPI. O(A log A) for A actions.
template <class Timing>
std::vector<Stall> walk_with_rendezvous(const Schedule& s, Timing& timing) {
  const TaskIndex& index = timing.index();
  const int ranks = static_cast<int>(s.ranks.size());
  // At one time: answers before announcements before arrivals before a rank's freeing, so that a
  // rank that ends an action as an answer reaches it sends at once (it looks between actions),
  // and every message due at a time is in before a rank that frees then picks its next action.
  enum Kind : std::uint8_t { kAck, kAnnounce, kArrive, kFree };
  struct Event {
    double time;
    Kind kind;
    std::uint64_t seq;  // first scheduled, first served among equals: the walk is deterministic
    int rank;           // whose event: the producer's (kAck), the consumer's, the freed one's
    std::size_t row;
    int slot;
    int from_stage;
    bool operator>(const Event& o) const {
      return std::tie(time, kind, seq) > std::tie(o.time, o.kind, o.seq);
    }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::uint64_t seq = 0;
  auto schedule = [&](double time, Kind kind, int rank, std::size_t row = 0, int slot = 0,
                      int from_stage = 0) {
    events.push({time, kind, seq++, rank, row, slot, from_stage});
  };
  std::vector<std::size_t> next(ranks, 0);
  std::vector<std::uint8_t> idle(ranks, 1);  // between actions
  // Per rank, its current action's span and that of any update after the action's sends: an
  // answer that comes in either waits for its end. The sends between them are MPI calls, so an
  // answer then is served at once.
  std::vector<double> busy_from(ranks, 0), busy_until(ranks, 0);
  std::vector<double> update_from(ranks, 0), update_until(ranks, 0);
  // Per output crossing by rendezvous: 1 announced, 2 asked for.
  LargeBuffer<std::uint8_t> state(index.rows() * 2, 0);

  auto send = [&](std::size_t row, int slot, int from_stage, double time) {
    const auto to = timing.destination(from_stage, slot);
    schedule(time + timing.delay(to), kArrive, index.rank_of(to.stage), row, slot, from_stage);
  };
  // Rank r, free at `now`: asks for the first input of its next action that is not in hand yet,
  // where that one goes by rendezvous and has been announced, and starts the action once every
  // input is in.
  auto look = [&](int r, double now) {
    if (!idle[r] || next[r] >= s.ranks[r].size()) return;
    const Action& a = s.ranks[r][next[r]];
    // The executor takes an action's inputs from other ranks one after another, in this order
    // (its lowered receives): it asks for one only once those before it are in hand.
    bool in_hand = true;
    for (const Task& t : a.tasks()) {
      if (!in_hand) break;
      index.for_each_dependency(t, [&](const TaskIndex::Dep& d) {
        if (index.rank_of(d.stage) == r) return true;
        const double arrived = timing.arrival(t, d);
        if (arrived <= now) return true;  // false while unknown (NaN)
        std::uint8_t& st = state[d.row * 2 + d.slot];
        const auto to = timing.destination(d.stage, d.slot);
        if (to.rendezvous && st == 1) {
          st = 2;
          schedule(now + timing.handshake(to), kAck, index.rank_of(d.stage), d.row, d.slot,
                   d.stage);
        }
        return in_hand = false;
      });
    }
    double start;
    if (!timing.inputs_ready(r, a, start)) return;
    idle[r] = 0;
    busy_from[r] = start;
    const auto [done, sent, free] = timing.run(r, next[r], a, start);
    busy_until[r] = done;
    update_from[r] = sent;
    update_until[r] = free;
    ++next[r];
    schedule(free, kFree, r);
    for (const Task& t : a.tasks()) {
      if (t.op == Op::W) continue;
      const int slot = TaskIndex::slot(t.op);
      const auto to = timing.destination(t.stage, slot);
      if (to.stage < 0) continue;
      const std::size_t row = index.row(t.stage, t.mb);
      if (to.rendezvous)
        schedule(done + timing.handshake(to), kAnnounce, index.rank_of(to.stage), row, slot,
                 t.stage);
      else
        send(row, slot, t.stage, done);  // eager: the consumer's rank looks when it arrives
    }
  };

  for (int r = 0; r < ranks; ++r) look(r, 0);
  while (!events.empty()) {
    const Event e = events.top();
    events.pop();
    switch (e.kind) {
      case kAck: {
        double leaves = e.time;
        if (!idle[e.rank] && busy_from[e.rank] <= e.time) {
          if (e.time < busy_until[e.rank])
            leaves = busy_until[e.rank];
          else if (update_from[e.rank] <= e.time && e.time < update_until[e.rank])
            leaves = update_until[e.rank];
        }
        send(e.row, e.slot, e.from_stage, leaves);
        break;
      }
      case kAnnounce:
        state[e.row * 2 + e.slot] = 1;
        look(e.rank, e.time);
        break;
      case kArrive:
        if (timing.destination(e.from_stage, e.slot).rendezvous)
          timing.arrive(e.row, e.slot, e.time);
        look(e.rank, e.time);
        break;
      case kFree:
        idle[e.rank] = 1;
        look(e.rank, e.time);
        break;
    }
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
  const bool shared = cores > 0 && cores < s.placement.ranks;
  const Placement& p = s.placement;
  bool rendezvous = false;
  for (int st = 0; st + 1 < p.stages() && !rendezvous; ++st)
    rendezvous = !p.is_last(st) && p.stage_rank[st] != p.stage_rank[st + 1] &&
                 costs.handshake(st, st + 1) >= 0;
  std::vector<Stall> stall;
  if (rendezvous) {
    if (shared)
      throw std::invalid_argument(
          "simulate: hand-overs by rendezvous are modelled with a device per rank only");
    ActionTiming<std::remove_reference_t<OnAction>, std::remove_reference_t<OnTransfer>,
                 std::remove_reference_t<After>, true>
        timing(s, costs, on_action, on_transfer, after);
    stall = walk_with_rendezvous(s, timing);
  } else if (!shared) {
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
  // The dependencies name an input gradient B whether a B or an I made it; a transfer is named
  // after the action that did, so the (stage, mb) rows whose backward was split are marked.
  const TaskIndex rows = options.record_comm ? TaskIndex(p) : TaskIndex(Placement{});
  std::vector<bool> split(options.record_comm ? rows.rows() : 0);
  auto record_action = [&](int r, std::size_t pos, const Action& a, double start, double finish,
                           double send, int sends) {
    trace.compute[offset[r] + pos] = {r, start, finish, a, -1, send, sends};
    if (options.record_comm)
      for (const Task& t : a.tasks())
        if (t.op == Op::I) split[rows.row(t.stage, t.mb)] = true;
  };
  auto record_transfer = [&](int from, int to, double sent, double arrived, Task t) {
    if (t.op == Op::B && split[rows.row(t.stage, t.mb)]) t.op = Op::I;
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
      [&](int r, std::size_t, const Action& a, double start, double finish, double, int) {
        stream.add(r, start, finish, a);
      },
      NoTransfers{}, [](int, std::size_t, double end) { return end; });
  return stream.finish();
}

}  // namespace ppbench
