#include "harness/metrics.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace ppbench {

namespace {

// A rank's events in execution order, none starting before the previous one ended.
bool in_order(const std::vector<const ComputeEvent*>& events) {
  for (std::size_t k = 1; k < events.size(); ++k)
    if (events[k]->start < events[k - 1]->end) return false;
  return true;
}

// Peak of alive activations over a rank's events in any order: +1 at the start of an F, -1 at
// the end of B or W, releases before acquisitions at equal times (half-open intervals).
int peak_by_edges(const std::vector<const ComputeEvent*>& events) {
  struct Edge {
    double time;
    int delta;
  };
  std::vector<Edge> edges;
  for (const ComputeEvent* e : events)
    for (const Task& t : e->action.tasks()) {
      if (t.op == Op::F) edges.push_back({e->start, +1});
      if (frees_activation(t)) edges.push_back({e->end, -1});
    }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.time < b.time || (a.time == b.time && a.delta < b.delta);
  });
  int alive = 0, peak = 0;
  for (const Edge& e : edges) peak = std::max(peak, alive += e.delta);
  return peak;
}

// The length of the union of `intervals` after time `from`: a rank's collectives may overlap one
// another in a measured trace, and the step waits for their union, not their sum.
double union_after(std::vector<std::pair<double, double>> intervals, double from) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0, covered = from;  // everything before `covered` is counted or excluded
  for (const auto& [start, end] : intervals) {
    const double a = std::max(start, covered);
    if (end > a) total += end - a, covered = end;
  }
  return total;
}

}  // namespace

MetricsStream::MetricsStream(const Placement& placement, int ranks)
    : placement_(&placement), ranks_(static_cast<std::size_t>(ranks)) {}

void MetricsStream::add_collective(int rank, double start, double end, double bytes) {
  Rank& r = ranks_[static_cast<std::size_t>(rank)];
  r.collectives.push_back({start, end});
  r.collective_bytes += bytes;
}

void MetricsStream::add_update(int rank, double start, double end) {
  Rank& r = ranks_[static_cast<std::size_t>(rank)];
  r.busy += end - start;
  r.update_end = r.updated ? std::max(r.update_end, end) : end;
  r.updated = true;
}

Metrics MetricsStream::finish() const {
  Metrics m;
  const int n = static_cast<int>(ranks_.size());
  m.ranks.resize(ranks_.size());
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  for (const Rank& r : ranks_)
    if (r.any) t0 = std::min(t0, r.first_start), t1 = std::max(t1, r.last_end);
  if (t1 < t0) {  // no work at all
    for (int i = 0; i < n; ++i) m.ranks[i].rank = i;
    return m;
  }
  // The step ends when the last compute action, collective or optimizer step does.
  for (const Rank& r : ranks_) {
    for (const Interval& c : r.collectives) t1 = std::max(t1, c.end);
    if (r.updated) t1 = std::max(t1, r.update_end);
  }
  m.makespan = t1 - t0;
  double total_idle = 0, longest_span = 0, busy_of_longest = 0;
  for (int i = 0; i < n; ++i) {
    const Rank& r = ranks_[static_cast<std::size_t>(i)];
    RankMetrics& rm = m.ranks[static_cast<std::size_t>(i)];
    rm.rank = i;
    rm.busy = r.busy;
    rm.first_start = r.any ? r.first_start : t0;  // a rank with no work
    rm.compute_end = r.any ? r.last_end : t0;
    rm.last_end = rm.compute_end;
    if (!r.collectives.empty()) {
      std::vector<std::pair<double, double>> spans;
      for (const Interval& c : r.collectives) {
        spans.emplace_back(c.start, c.end);
        rm.allreduce_time += c.end - c.start;
        rm.last_end = std::max(rm.last_end, c.end);
      }
      rm.collectives = static_cast<int>(r.collectives.size());
      rm.allreduce_bytes = r.collective_bytes;
      rm.exposed_allreduce = union_after(std::move(spans), rm.compute_end);
      m.collectives += rm.collectives;
      m.allreduce_time = std::max(m.allreduce_time, rm.allreduce_time);
      m.allreduce_bytes = std::max(m.allreduce_bytes, rm.allreduce_bytes);
      m.exposed_allreduce = std::max(m.exposed_allreduce, rm.exposed_allreduce);
    }
    if (r.updated) rm.last_end = std::max(rm.last_end, r.update_end);
    rm.idle = m.makespan - rm.busy;
    const double span = rm.last_end - rm.first_start;
    rm.span_idle = span - rm.busy;
    rm.peak_activations = r.peak;
    rm.peak_activation_share = static_cast<double>(r.peak) / placement_->stages_per_chain();
    m.total_busy += rm.busy;
    total_idle += rm.idle;
    if (span > longest_span) longest_span = span, busy_of_longest = rm.busy;
    m.peak_activations = std::max(m.peak_activations, rm.peak_activations);
  }
  m.bubble_fraction = m.makespan > 0 ? total_idle / (n * m.makespan) : 0;
  m.bubble_ratio = m.total_busy > 0 ? total_idle / m.total_busy : 0;
  m.zb_bubble_rate = longest_span > 0 ? (longest_span - busy_of_longest) / longest_span : 0;
  return m;
}

namespace {

void add_collectives(MetricsStream& stream, const Trace& trace) {
  for (const CollectiveEvent& c : trace.collectives)
    stream.add_collective(c.rank, c.start, c.end, c.bytes);
  for (const UpdateEvent& u : trace.updates) stream.add_update(u.rank, u.start, u.end);
}

}  // namespace

Metrics compute_metrics(const Trace& trace, const Placement& placement) {
  // The common case, every trace the simulator writes and the executors' too: each rank's events
  // come in execution order, none starting before the previous one ended. Then one pass.
  std::vector<double> last_end(static_cast<std::size_t>(trace.ranks), -1e300);
  bool ordered = true;
  for (const ComputeEvent& e : trace.compute) {
    double& last = last_end[static_cast<std::size_t>(e.rank)];
    if (e.start < last) {
      ordered = false;
      break;
    }
    last = e.end;
  }
  if (ordered) {
    MetricsStream stream(placement, trace.ranks);
    for (const ComputeEvent& e : trace.compute) stream.add(e.rank, e.start, e.end, e.action);
    add_collectives(stream, trace);
    return stream.finish();
  }

  // Otherwise (a measured trace merged from several sources, or with overlapping events): each
  // rank's events by start, keeping trace order at ties, and activations counted by their edges
  // where events overlap.
  std::vector<std::vector<const ComputeEvent*>> by_rank(static_cast<std::size_t>(trace.ranks));
  for (const ComputeEvent& e : trace.compute)
    by_rank[static_cast<std::size_t>(e.rank)].push_back(&e);
  MetricsStream stream(placement, trace.ranks);
  std::vector<int> peaks;
  for (auto& events : by_rank) {
    std::stable_sort(
        events.begin(), events.end(),
        [](const ComputeEvent* a, const ComputeEvent* b) { return a->start < b->start; });
    for (const ComputeEvent* e : events) stream.add(e->rank, e->start, e->end, e->action);
    peaks.push_back(in_order(events) ? -1 : peak_by_edges(events));
  }
  add_collectives(stream, trace);
  Metrics m = stream.finish();
  for (std::size_t r = 0; r < peaks.size(); ++r)
    if (peaks[r] >= 0) {
      m.ranks[r].peak_activations = peaks[r];
      m.ranks[r].peak_activation_share =
          static_cast<double>(peaks[r]) / placement.stages_per_chain();
    }
  m.peak_activations = 0;
  for (const RankMetrics& rm : m.ranks)
    m.peak_activations = std::max(m.peak_activations, rm.peak_activations);
  return m;
}

}  // namespace ppbench
