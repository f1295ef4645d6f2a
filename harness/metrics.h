// The metrics of docs/metrics.md, computed from a Trace (simulated or measured).
//
//  makespan          first action start to last action or collective end, over all ranks
//  bubble_fraction   sum idle / (ranks * makespan), idle_r = makespan - busy_r
//                    (GPipe's (D-1)/(N+D-1))
//  bubble_ratio      sum idle / sum busy (Megatron's (p-1)/m)
//  span_idle_r       (last end - first start on r) - busy_r
//  zb_bubble_rate    (max_r span_r - busy_r*) / max_r span_r, r* the rank with
//                    the longest span (the Zero Bubble paper's definition;
//                    every rank is equally busy when costs are uniform)
//  peak_activations  most (stage, mb) activations alive at once on a rank:
//                    alive from the start of F to the end of its last backward
//                    op (B, or W when the backward is split: a valid schedule
//                    has a W for every I)
//
// Collectives (data-parallel gradient all-reduces, trace.h) count toward the makespan and a
// rank's span but never toward busy time: the part of them not hidden behind the rank's compute
// is idle, bubble like any other wait (docs/metrics.md, "Data parallelism").
//  allreduce_time_r     sum of the rank's collective durations
//  exposed_allreduce_r  the time after the rank's last compute end during which one of its
//                       collectives runs (the all-reduce the step waits for)
// Optimizer steps (`run --optimizer`, trace.h UpdateEvent) are busy time and count toward the
// makespan and the rank's span; compute_end (and so the exposed all-reduce) is the actions' own.
#pragma once

#include <algorithm>
#include <vector>

#include "harness/trace.h"
#include "schedules/placement.h"

namespace ppbench {

struct RankMetrics {
  int rank = 0;
  double busy = 0, idle = 0, span_idle = 0;
  double first_start = 0, last_end = 0;
  int peak_activations = 0;
  // peak_activations in units of one whole-model micro-batch activation A,
  // taking every stage of a chain to hold an equal share (1/stages per chain).
  double peak_activation_share = 0;
  // Data-parallel all-reduces on this rank (all 0 when the trace has none).
  int collectives = 0;
  double allreduce_time = 0, allreduce_bytes = 0, exposed_allreduce = 0;
  double compute_end = 0;  // the last compute end; last_end also counts collectives
};

struct Metrics {
  double makespan = 0;
  double total_busy = 0;
  double bubble_fraction = 0, bubble_ratio = 0, zb_bubble_rate = 0;
  int peak_activations = 0;  // max over ranks
  // Collectives in the trace, and the largest per-rank all-reduce time, bytes and exposed time.
  int collectives = 0;
  double allreduce_time = 0, allreduce_bytes = 0, exposed_allreduce = 0;
  std::vector<RankMetrics> ranks;
};

// The activation rule (docs/metrics.md): an F holds its (stage, micro-batch) activation from its
// start; B, or W after I, frees it at its end.
inline bool frees_activation(const Task& t) { return t.op == Op::B || t.op == Op::W; }

// The metrics of a trace (simulated or measured).
Metrics compute_metrics(const Trace& trace, const Placement& placement);

// The same metrics gathered one action at a time, with nothing kept per action: what the
// simulator computes when no trace is asked for (harness/simulator.h, simulate_metrics). Each
// rank's actions must come in execution order, each starting no earlier than the previous one
// ended (so that activations are counted as they come: a release at time t precedes an
// acquisition at t, as on the trace's half-open intervals).
class MetricsStream {
 public:
  MetricsStream(const Placement& placement, int ranks);
  // Inline: the simulator calls it for every action.
  void add(int rank, double start, double end, const Action& a) {
    Rank& r = ranks_[static_cast<std::size_t>(rank)];
    if (!r.any) r.first_start = start, r.last_end = end, r.any = true;
    r.busy += end - start;
    r.first_start = std::min(r.first_start, start);
    r.last_end = std::max(r.last_end, end);
    // The acquisition at this action's start comes after every earlier release (they ended at or
    // before it) and before this action's own release at its end.
    for (const Task& t : a.tasks())
      if (t.op == Op::F) r.peak = std::max(r.peak, ++r.alive);
    for (const Task& t : a.tasks())
      if (frees_activation(t)) --r.alive;
  }
  // A collective on `rank`, in any order relative to the compute actions.
  void add_collective(int rank, double start, double end, double bytes);
  // An optimizer step on `rank`: busy time, after the rank's actions.
  void add_update(int rank, double start, double end);
  Metrics finish() const;

 private:
  struct Interval {
    double start, end;
  };
  struct Rank {
    double busy = 0, first_start = 0, last_end = 0;
    bool any = false;
    int alive = 0, peak = 0;
    double collective_bytes = 0;
    bool updated = false;  // optimizer steps: busy, and after the actions
    double update_end = 0;
    std::vector<Interval> collectives;
  };
  const Placement* placement_;
  std::vector<Rank> ranks_;
};

}  // namespace ppbench
