#include "harness/metrics.h"

#include <algorithm>
#include <limits>

namespace ppbench {

namespace {

// Peak of alive (stage, mb) activations per rank: +1 at the start of an F,
// -1 at the end of the last backward op of that (stage, mb). Releases at a
// time sort before acquisitions at the same time (intervals are half-open).
void peak_activations(const Trace& trace, const Placement& p, std::vector<RankMetrics>& out) {
  // Which (stage, mb) split their backward: their activation lives until W.
  std::vector<std::size_t> base(p.stages() + 1, 0);
  for (int s = 0; s < p.stages(); ++s) base[s + 1] = base[s] + p.microbatches_of(s);
  std::vector<std::uint8_t> split(base.back(), 0);
  for (const auto& e : trace.compute)
    if (!e.action.paired && e.action.task.op == Op::W)
      split[base[e.action.task.stage] + e.action.task.mb] = 1;

  struct Edge {
    double time;
    int delta;
  };
  std::vector<std::vector<Edge>> edges(trace.ranks);
  auto visit = [&](const ComputeEvent& e, const Task& t) {
    const bool is_split = split[base[t.stage] + t.mb];
    if (t.op == Op::F)
      edges[e.rank].push_back({e.start, +1});
    else if ((t.op == Op::B) || (t.op == Op::W) || (t.op == Op::I && !is_split))
      edges[e.rank].push_back({e.end, -1});
  };
  for (const auto& e : trace.compute) {
    visit(e, e.action.task);
    if (e.action.paired) visit(e, e.action.partner);
  }
  for (int r = 0; r < trace.ranks; ++r) {
    auto& ev = edges[r];
    auto before = [](const Edge& a, const Edge& b) {
      return a.time < b.time || (a.time == b.time && a.delta < b.delta);
    };
    // A rank's events arrive in execution order, which is already time order
    // with releases first at ties; sort only traces that are not.
    if (!std::is_sorted(ev.begin(), ev.end(), before)) std::sort(ev.begin(), ev.end(), before);
    int alive = 0, peak = 0;
    for (const auto& e : ev) peak = std::max(peak, alive += e.delta);
    out[r].peak_activations = peak;
    out[r].peak_activation_share = static_cast<double>(peak) / p.stages_per_chain();
  }
}

}  // namespace

Metrics compute_metrics(const Trace& trace, const Placement& placement) {
  Metrics m;
  m.ranks.resize(trace.ranks);
  constexpr double inf = std::numeric_limits<double>::infinity();
  for (int r = 0; r < trace.ranks; ++r) {
    m.ranks[r].rank = r;
    m.ranks[r].first_start = inf;
    m.ranks[r].last_end = -inf;
  }
  double t0 = inf, t1 = -inf;
  for (const auto& e : trace.compute) {
    auto& rm = m.ranks[e.rank];
    rm.busy += e.end - e.start;
    rm.first_start = std::min(rm.first_start, e.start);
    rm.last_end = std::max(rm.last_end, e.end);
    t0 = std::min(t0, e.start);
    t1 = std::max(t1, e.end);
  }
  if (trace.compute.empty()) return m;
  m.makespan = t1 - t0;
  double total_idle = 0, longest_span = 0, busy_of_longest = 0;
  for (auto& rm : m.ranks) {
    if (rm.first_start == inf) rm.first_start = rm.last_end = t0;  // a rank with no work
    rm.idle = m.makespan - rm.busy;
    const double span = rm.last_end - rm.first_start;
    rm.span_idle = span - rm.busy;
    m.total_busy += rm.busy;
    total_idle += rm.idle;
    if (span > longest_span) longest_span = span, busy_of_longest = rm.busy;
  }
  m.bubble_fraction = m.makespan > 0 ? total_idle / (trace.ranks * m.makespan) : 0;
  m.bubble_ratio = m.total_busy > 0 ? total_idle / m.total_busy : 0;
  m.zb_bubble_rate = longest_span > 0 ? (longest_span - busy_of_longest) / longest_span : 0;
  peak_activations(trace, placement, m.ranks);
  for (const auto& rm : m.ranks)
    m.peak_activations = std::max(m.peak_activations, rm.peak_activations);
  return m;
}

}  // namespace ppbench
