// Megatron-LM's interleaved 1F1B (virtual pipeline parallelism).
//
// Rank r holds v model chunks; chunk c is stage c*D + r. Forwards walk a
// schedule table that takes micro-batches in groups of g (the
// "micro-batch group size per virtual stage", default D): for each group,
// chunk 0 for every micro-batch of the group, then chunk 1, and so on; the
// last group takes whatever micro-batches remain. The k-th backward uses the
// same table entry with the chunk order reversed (chunk v-1-c).
//
// Warm-up: (D-r-1)*2 + (v-1)*g virtual forwards (all of them if that is
// more than N*v), then one forward / one backward, then the remaining
// backwards — Megatron's forward_backward_pipelining_with_interleaving.
//
// When N is not a multiple of g the table ends with a short group, and for
// some (D, v, N mod g) rank 0 then needs a chunk's input before rank D-1 can
// produce it: the order deadlocks. Those parameters are rejected.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "schedules/formulas.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace ppbench {

namespace {

// (micro-batch, chunk) of the k-th virtual forward, Megatron's schedule table.
std::vector<std::pair<int, int>> schedule_table(int n, int v, int g) {
  std::vector<std::pair<int, int>> table;
  table.reserve(static_cast<std::size_t>(n) * v);
  for (int first = 0; first < n; first += g) {
    const int last = (first + g >= n) ? n : first + g;
    for (int c = 0; c < v; ++c)
      for (int m = first; m < last; ++m) table.emplace_back(m, c);
  }
  return table;
}

}  // namespace

Schedule generate_interleaved_1f1b(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  const int v = p.chunks == 0 ? 2 : p.chunks;
  const int g = p.group_size == 0 ? d : p.group_size;
  require(v >= 2, "interleaved-1f1b needs --chunks >= 2, got " + std::to_string(v) +
                      " (with one chunk per rank use 1f1b)");
  // Without --group-size, g is D, so the one constraint the user set is N >= D: name that.
  require(p.group_size != 0 || n >= d,
          "interleaved-1f1b needs N >= D (each micro-batch group holds D micro-batches), got N=" +
              std::to_string(n) + " with D=" + std::to_string(d));
  require(g >= d && g <= n,
          "interleaved-1f1b needs D <= --group-size <= N (Megatron's micro-batch "
          "group size per virtual stage), got group size " +
              std::to_string(g) + " with D=" + std::to_string(d) + ", N=" + std::to_string(n));

  Schedule s{p, Placement::interleaved(d, v, n), {}};
  s.params.chunks = v;
  s.params.group_size = g;
  s.ranks.resize(d);
  const auto table = schedule_table(n, v, g);
  const int total = n * v;
  for (int r = 0; r < d; ++r) {
    auto& out = s.ranks[r];
    out.reserve(2 * static_cast<std::size_t>(total));
    auto forward = [&](int k) {
      auto [m, c] = table[k];
      out.push_back(Action::single(Op::F, c * d + r, m));
    };
    auto backward = [&](int k) {
      auto [m, c] = table[k];
      out.push_back(Action::single(Op::B, (v - 1 - c) * d + r, m));
    };
    const int warmup = std::min((d - r - 1) * 2 + (v - 1) * g, total);
    const int steady = total - warmup;
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k < steady; ++k) {
      forward(warmup + k);
      backward(k);
    }
    for (int k = steady; k < total; ++k) backward(k);
  }
  if (n % g != 0) {
    try {
      validate(s);
    } catch (const InvalidSchedule& e) {
      require(false, "interleaved-1f1b deadlocks for D=" + std::to_string(d) +
                         ", N=" + std::to_string(n) + ", --chunks " + std::to_string(v) +
                         ", --group-size " + std::to_string(g) +
                         ": the last micro-batch group has only " + std::to_string(n % g) +
                         " micro-batch(es); use N a multiple of the group "
                         "size (" +
                         e.what() + ")");
    }
  }
  return s;
}

ClosedForm closed_form_interleaved_1f1b(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  const int v = p.chunks == 0 ? 2 : p.chunks;
  const int g = p.group_size == 0 ? p.devices : p.group_size;
  ClosedForm out;
  out.bubble_formula = "(D-1)/(D-1+vN) when N is a multiple of the group size g";
  out.idle_formula = "(D-1)(F+B) when N is a multiple of the group size g";
  if (p.microbatches % g == 0) {
    out.bubble_fraction = (d - 1) / (d - 1 + v * n);
    out.idle_per_rank = (d - 1) * (c.f + c.b);
  } else {
    // The table ends with a short group: its chunks cannot fill the pipeline, and the ranks
    // wait about as long as 1F1B's warm-up again (D = 4, N = 13, g = 4: 0.204 against plain
    // 1F1B's 0.1875), so the closed form does not hold. A group of all N micro-batches has no
    // short group (--group-size N: 0.103 there).
    out.note = "N = " + std::to_string(p.microbatches) +
               " is not a multiple of the group size g = " + std::to_string(g) +
               ": the last group is short, the closed form does not hold, and "
               "the bubble can exceed plain 1F1B's; --group-size " +
               std::to_string(p.microbatches) + " (one group) avoids the short group";
  }
  return out;
}

}  // namespace ppbench
