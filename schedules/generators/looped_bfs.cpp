// Breadth-first looped pipeline (Lamy-Poirier, "Breadth-First Pipeline
// Parallelism", 2022, arXiv:2211.05953), in the order of PyTorch's
// ScheduleLoopedBFS (torch/distributed/pipelining/schedules.py,
// ScheduleLoopedBFS._calculate_single_rank_operations, PyTorch 2.15).
//
// Rank r holds v stages, c*D + r (the interleaved placement), and loops
// through them breadth-first: where interleaved 1F1B takes the earliest
// micro-batch first, this takes the earliest stage, running every micro-batch
// through it before the next. So rank r runs the forwards of all N
// micro-batches for chunk 0, then all N for chunk 1, and so on; then the
// backwards chunk by chunk from the last, each chunk's micro-batches from the
// last to the first (the one whose forward finished last goes first). With
// v = 1 this is GPipe with the backwards in reverse order.
//
// PyTorch pads the lists with idle slots; ppbench's ranks just wait, so only
// the order of the compute actions is kept.
#include <string>

#include "schedules/formulas.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_looped_bfs(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  const int v = p.chunks == 0 ? 2 : p.chunks;
  // PyTorch takes any number of local stages, one included.
  require(v >= 1, "looped-bfs needs --chunks >= 1, got " + std::to_string(v));

  Schedule s{p, Placement::interleaved(d, v, n), {}};
  s.params.chunks = v;
  s.ranks.resize(d);
  for (int r = 0; r < d; ++r) {
    auto& out = s.ranks[r];
    out.reserve(2 * static_cast<std::size_t>(v) * n);
    for (int c = 0; c < v; ++c)
      for (int m = 0; m < n; ++m) out.push_back(Action::single(Op::F, c * d + r, m));
    for (int c = v - 1; c >= 0; --c)
      for (int m = n - 1; m >= 0; --m) out.push_back(Action::single(Op::B, c * d + r, m));
  }
  return s;
}

ClosedForm closed_form_looped_bfs(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  const int v = p.chunks == 0 ? 2 : p.chunks;
  ClosedForm out;
  // The paper's breadth-first bubble: GPipe's (D-1)(F+B) fill and drain, once,
  // spread over v times the work. It needs N >= D: with fewer micro-batches a
  // rank finishes a chunk's forwards before the first micro-batch comes back
  // around the ring for the next chunk, and waits again at every loop.
  out.bubble_formula = "(D-1)/(D-1+vN) when N >= D";
  out.idle_formula = "(D-1)(F+B) when N >= D";
  out.activations_formula = "vN";
  out.peak_activations = v * p.microbatches;
  if (p.microbatches >= p.devices) {
    out.bubble_fraction = (d - 1) / (d - 1 + v * n);
    out.idle_per_rank = (d - 1) * (c.f + c.b);
  } else {
    out.note = "N = " + std::to_string(p.microbatches) + " < D = " + std::to_string(p.devices) +
               ": every loop waits for its first micro-batch to come around the ring, so "
               "(D-1)/(D-1+vN) does not hold";
  }
  return out;
}

}  // namespace ppbench
