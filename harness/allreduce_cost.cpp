#include "harness/allreduce_cost.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace ppbench {

double ring_allreduce_time(double bytes, int replicas, const RingLink& link) {
  if (replicas <= 1) return 0;
  const double steps = 2.0 * (replicas - 1);  // reduce-scatter + all-gather
  return steps * link.latency + steps / replicas * bytes / link.bandwidth;
}

namespace {

// True when `t` produces weight gradients: B, or W when the backward is split (I does not).
bool makes_weight_grad(const Task& t) { return t.op == Op::B || t.op == Op::W; }

// The optimizer's updates read the summed gradients: as the runs across processes do, a rank
// updates its stages after its last action, one at a time in their order, each once its all-
// reduce (its stage's, or without overlap the rank's) has ended. Each keeps its duration.
void updates_after_allreduces(Trace& trace, const Placement& p,
                              const std::vector<double>& rank_end) {
  if (trace.updates.empty()) return;
  std::vector<double> summed(static_cast<std::size_t>(p.stages()), 0);
  for (const CollectiveEvent& c : trace.collectives)
    for (int st = 0; st < p.stages(); ++st)
      if (c.stage == st || (c.stage < 0 && p.stage_rank[st] == c.rank))
        summed[static_cast<std::size_t>(st)] =
            std::max(summed[static_cast<std::size_t>(st)], c.end);
  std::stable_sort(trace.updates.begin(), trace.updates.end(),
                   [](const UpdateEvent& a, const UpdateEvent& b) {
                     return a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
                   });
  std::vector<double> free_at = rank_end;
  for (UpdateEvent& u : trace.updates) {
    double& at = free_at.at(static_cast<std::size_t>(u.rank));
    const double length = u.end - u.start;
    u.start = std::max(at, summed.at(static_cast<std::size_t>(u.stage)));
    u.end = u.start + length;
    at = u.end;
  }
}

}  // namespace

void add_allreduces(Trace& trace, const Schedule& s, const DataParallel& dp) {
  const Placement& p = s.placement;
  if (dp.stage_bytes.size() != static_cast<std::size_t>(p.stages()))
    throw std::invalid_argument("add_allreduces: " + std::to_string(dp.stage_bytes.size()) +
                                " stage byte counts for " + std::to_string(p.stages()) + " stages");
  if (dp.replicas <= 1) return;
  const std::size_t ranks = static_cast<std::size_t>(trace.ranks);
  std::vector<double> rank_end(ranks, 0);
  std::vector<bool> rank_busy(ranks, false);
  std::vector<double> stage_ready(static_cast<std::size_t>(p.stages()), 0);
  for (const ComputeEvent& e : trace.compute) {
    const std::size_t r = static_cast<std::size_t>(e.rank);
    rank_end[r] = rank_busy[r] ? std::max(rank_end[r], e.end) : e.end;
    rank_busy[r] = true;
    for (const Task& t : e.action.tasks()) {
      double& ready = stage_ready[static_cast<std::size_t>(t.stage)];
      if (makes_weight_grad(t)) ready = std::max(ready, e.end);
    }
  }

  if (!dp.overlap) {
    // One all-reduce per rank of every stage it holds, after its last action.
    std::vector<double> bytes(ranks, 0);
    for (int st = 0; st < p.stages(); ++st)
      bytes[static_cast<std::size_t>(p.stage_rank[st])] += dp.stage_bytes[st];
    for (std::size_t r = 0; r < ranks; ++r) {
      if (!rank_busy[r]) continue;
      const double t = ring_allreduce_time(bytes[r], dp.replicas, dp.link);
      trace.collectives.push_back(
          {static_cast<std::int32_t>(r), rank_end[r], rank_end[r] + t, -1, bytes[r]});
    }
    updates_after_allreduces(trace, p, rank_end);
    return;
  }

  // Overlapped: each stage once its gradients are final, one at a time per rank.
  std::vector<std::vector<int>> stages_of(ranks);
  for (int st = 0; st < p.stages(); ++st)
    stages_of[static_cast<std::size_t>(p.stage_rank[st])].push_back(st);
  for (std::size_t r = 0; r < ranks; ++r) {
    std::vector<int>& order = stages_of[r];
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return stage_ready[static_cast<std::size_t>(a)] < stage_ready[static_cast<std::size_t>(b)];
    });
    double free_at = 0;
    for (int st : order) {
      const double start = std::max(free_at, stage_ready[static_cast<std::size_t>(st)]);
      free_at = start + ring_allreduce_time(dp.stage_bytes[st], dp.replicas, dp.link);
      trace.collectives.push_back(
          {static_cast<std::int32_t>(r), start, free_at, st, dp.stage_bytes[st]});
    }
  }
  updates_after_allreduces(trace, p, rank_end);
}

}  // namespace ppbench
