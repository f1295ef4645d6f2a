#include "harness/replay.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "schedules/stage_ends.h"

namespace ppbench {

namespace {

struct Mean {
  double sum = 0;
  long count = 0;
  void add(double v) { sum += v, ++count; }
  bool any() const { return count > 0; }
  double value() const { return count ? sum / static_cast<double>(count) : 0; }
};

// An optimizer step's time on its core: its CPU time where ranks shared cores, else its span.
double update_time(const UpdateEvent& u) { return u.cpu >= 0 ? u.cpu : u.end - u.start; }

// Where ranks shared cores: per rank, the CPU time its thread spent on neither an action nor an
// optimizer step (receives, sends, waking other ranks), spread evenly over its actions.
std::vector<double> executor_cpu_per_action(const Trace& trace) {
  const auto ranks = static_cast<std::size_t>(trace.ranks);
  std::vector<double> rest(ranks, 0.0), actions(ranks, 0.0);
  if (trace.rank_cpu.size() != ranks) return rest;
  for (std::size_t r = 0; r < ranks; ++r) rest[r] = trace.rank_cpu[r];
  for (const auto& e : trace.compute) {
    rest[static_cast<std::size_t>(e.rank)] -= std::max(e.cpu, 0.0);
    actions[static_cast<std::size_t>(e.rank)] += 1;
  }
  for (const auto& u : trace.updates) rest[static_cast<std::size_t>(u.rank)] -= update_time(u);
  for (std::size_t r = 0; r < ranks; ++r)
    rest[r] = actions[r] > 0 ? std::max(rest[r], 0.0) / actions[r] : 0.0;
  return rest;
}

}  // namespace

HandOver hand_over_from_trace(const Trace& trace) {
  // A queued receive is all the consumer's own work; one that waited is the hand-over's
  // latency as well as that work, so the latency is what the waiting ones took beyond it.
  Mean queued, waited;
  for (const auto& c : trace.comm) (c.queued ? queued : waited).add(c.end - c.start);
  HandOver h;
  h.receive = queued.value();
  h.delay = waited.any() ? std::max(waited.value() - h.receive, 0.0) : 0.0;
  double sending = 0;
  long sends = 0;
  for (const auto& e : trace.compute) sending += e.send, sends += e.sends;
  h.send = sends > 0 ? sending / static_cast<double>(sends) : 0.0;
  return h;
}

CostModel costs_from_trace(const Trace& trace, const Placement& placement) {
  const bool shared = trace.shared_cores > 0;
  const std::vector<double> executor =
      shared ? executor_cpu_per_action(trace) : std::vector<double>(placement.ranks, 0.0);
  // An action's time on its core where ranks shared cores, else its span.
  auto duration = [&](const ComputeEvent& e) {
    return shared && e.cpu >= 0 ? e.cpu + executor[static_cast<std::size_t>(e.rank)]
                                : e.end - e.start;
  };
  // Per stage: F, B, I, W (overlapped pairs below, against these).
  std::vector<std::array<Mean, 4>> m(placement.stages());
  for (const auto& e : trace.compute)
    if (!e.action.paired())
      m[e.action.task.stage][static_cast<int>(e.action.task.op)].add(duration(e));
  const HandOver hand_over = hand_over_from_trace(trace);

  std::vector<StageCost> stages(placement.stages());
  for (int s = 0; s < placement.stages(); ++s) {
    auto& [f, b, i, w] = m[s];
    StageCost& c = stages[s];
    c.f = f.value();
    c.i = i.any() ? i.value() : b.value() / 2;
    c.w = w.any() ? w.value() : b.value() / 2;
    c.b = b.any() ? b.value() : c.i + c.w;
    c.fb = c.f + c.b;
    c.comm = hand_over.delay;
    c.recv = hand_over.receive;
    // Where ranks shared cores a send call's CPU time is already in the executor's work spread
    // over the actions above, and its span holds other ranks' slices.
    c.send = shared ? 0.0 : hand_over.send;
  }
  // What overlapping saved, per forward stage: a pair's halves may be two stages of different
  // costs (a V shape's first and last), so each pair is compared with its own halves.
  std::vector<Mean> saved(placement.stages());
  const CostModel halves(stages);
  for (const auto& e : trace.compute)
    if (e.action.paired()) saved[e.action.task.stage].add(halves.time(e.action) - duration(e));
  for (int s = 0; s < placement.stages(); ++s) stages[s].fb -= saved[s].value();
  return CostModel(std::move(stages));
}

std::vector<OptimizerStep> optimizer_steps_from_trace(const Trace& trace,
                                                      const Placement& placement) {
  // Per rank, the end of each of its actions in the order it ran them (its position).
  std::vector<std::vector<double>> ends(static_cast<std::size_t>(placement.ranks));
  for (const auto& e : trace.compute) ends[static_cast<std::size_t>(e.rank)].push_back(e.end);
  std::vector<OptimizerStep> steps;
  for (const UpdateEvent& u : trace.updates) {
    if (u.rank < 0 || u.rank >= placement.ranks)
      throw std::logic_error("replay: an optimizer step on rank " + std::to_string(u.rank) +
                             " of a " + std::to_string(placement.ranks) + "-rank step");
    const auto& mine = ends[static_cast<std::size_t>(u.rank)];
    // An update begins after the action it follows has ended, and before the next one begins.
    const auto after = std::upper_bound(mine.begin(), mine.end(), u.start);
    if (after == mine.begin()) continue;  // before any action: nothing to follow
    steps.push_back(
        {u.rank, static_cast<std::size_t>(after - mine.begin() - 1), u.stage, update_time(u)});
  }
  return steps;
}

std::vector<OptimizerStep> optimizer_steps_after_backwards(const Schedule& s,
                                                           const std::vector<double>& seconds) {
  std::vector<OptimizerStep> steps;
  for (int r = 0; r < s.placement.ranks; ++r) {
    const auto& order = s.ranks[static_cast<std::size_t>(r)];
    for (const auto& [position, stage] :
         stage_last_backwards(order.size(), [&order](std::size_t i) { return &order[i]; })) {
      const double d = seconds.at(static_cast<std::size_t>(s.placement.part(stage)));
      if (d > 0) steps.push_back({r, position, stage, d});
    }
  }
  return steps;
}

void add_updates_after_allreduces(Trace& trace, const std::vector<OptimizerStep>& steps) {
  std::vector<double> free_at(static_cast<std::size_t>(trace.ranks), 0);
  for (const auto& e : trace.compute)
    free_at[static_cast<std::size_t>(e.rank)] =
        std::max(free_at[static_cast<std::size_t>(e.rank)], e.end);
  for (const auto& c : trace.collectives)
    free_at[static_cast<std::size_t>(c.rank)] =
        std::max(free_at[static_cast<std::size_t>(c.rank)], c.end);
  for (const OptimizerStep& o : steps) {
    double& at = free_at[static_cast<std::size_t>(o.rank)];
    trace.updates.push_back({o.rank, at, at + o.duration, o.stage});
    at += o.duration;
  }
}

DataParallel data_parallel_from_trace(const Trace& trace, const Schedule& s, int replicas,
                                      bool overlap) {
  const Placement& p = s.placement;
  DataParallel dp;
  dp.replicas = replicas;
  dp.overlap = overlap;
  dp.stage_bytes.assign(static_cast<std::size_t>(p.stages()), 0);
  std::vector<int> first_stage(static_cast<std::size_t>(p.ranks), -1);
  for (int st = p.stages() - 1; st >= 0; --st) first_stage[p.stage_rank[st]] = st;
  double volume = 0, time = 0;
  for (const CollectiveEvent& c : trace.collectives) {
    const int st = c.stage >= 0 ? c.stage : first_stage[static_cast<std::size_t>(c.rank)];
    if (st < 0) continue;
    dp.stage_bytes[static_cast<std::size_t>(st)] += c.bytes;
    volume += c.bytes;
    time += c.end - c.start;
  }
  // T = 2 (R - 1) / R * bytes / bandwidth, summed over the measured all-reduces.
  const double traffic = replicas > 1 ? 2.0 * (replicas - 1) / replicas * volume : 0;
  dp.link.bandwidth = traffic > 0 && time > 0 ? traffic / time : 1;
  dp.link.latency = 0;
  return dp;
}

}  // namespace ppbench
