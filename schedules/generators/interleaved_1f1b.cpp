// Megatron-LM's interleaved 1F1B (virtual pipeline parallelism), and PyTorch's
// ScheduleInterleaved1F1B, which is the same order with its own group size.
//
// Rank r holds v model chunks; chunk c is stage c*D + r. Forwards walk a
// schedule table that takes micro-batches in groups of g (the
// "micro-batch group size per virtual stage"): for each group,
// chunk 0 for every micro-batch of the group, then chunk 1, and so on; the
// last group takes whatever micro-batches remain. The k-th backward uses the
// same table entry with the chunk order reversed (chunk v-1-c).
//
// Warm-up: (D-r-1)*2 + (v-1)*g virtual forwards (all of them if that is
// more than N*v), then one forward / one backward, then the remaining
// backwards — Megatron's forward_backward_pipelining_with_interleaving.
//
// g defaults to D (Megatron) when N >= D and to N when N < D (Megatron refuses N < D; PyTorch
// runs one round of N). PyTorch's round size is N / max(1, N div D) where that divides N, and
// with that g the order is PyTorch's action for action (its warm-up is
// _get_warmup_ops(multiply_factor=2), the same count).
//
// When N is not a multiple of g the table ends with a short group, and for
// some (D, v, N mod g) rank 0 then needs a chunk's input before rank D-1 can
// produce it: the order deadlocks. A group smaller than D can deadlock too. Those orders are
// validated here and refused with a group size that runs (PyTorch's where it does).
#include <algorithm>
#include <string>
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

// The group size without --group-size: Megatron's D, or all N micro-batches when N < D
// (PyTorch's single round; Megatron refuses N < D).
int default_group_size(int d, int n) { return n < d ? n : d; }

// PyTorch's ScheduleInterleaved1F1B: rounds = max(1, N div D) of N / rounds micro-batches, or 0
// where PyTorch refuses N (not a multiple of its rounds).
int pytorch_group_size(int d, int n) {
  const int rounds = std::max(1, n / d);
  return n % rounds == 0 ? n / rounds : 0;
}

Schedule build(const ScheduleParams& p, int d, int n, int v, int g) {
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
  return s;
}

// Why `s` cannot run (the validator's words), or "" where it is sound.
std::string unsound(const Schedule& s) {
  try {
    validate(s);
    return "";
  } catch (const InvalidSchedule& e) {
    return e.what();
  }
}

}  // namespace

Schedule generate_interleaved_1f1b(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  const int v = p.chunks == 0 ? 2 : p.chunks;
  const int g = p.group_size == 0 ? default_group_size(d, n) : p.group_size;
  require(v >= 2, "interleaved-1f1b needs --chunks >= 2, got " + std::to_string(v) +
                      " (with one chunk per rank use 1f1b)");
  require(g >= 1 && g <= n,
          "interleaved-1f1b needs 1 <= --group-size <= N (Megatron's micro-batch group size "
          "per virtual stage), got group size " +
              std::to_string(g) + " with N=" + std::to_string(n));

  Schedule s = build(p, d, n, v, g);
  // Megatron's order (g >= D, N a multiple of g) is sound; a short last group or a group
  // smaller than D can deadlock, so those orders are proven here and refused if they do.
  if (g >= d && n % g == 0) return s;
  const std::string deadlock = unsound(s);
  if (deadlock.empty()) return s;
  std::string why =
      g < d ? "the micro-batch group size is below D=" + std::to_string(d)
            : "the last micro-batch group has only " + std::to_string(n % g) + " micro-batch(es)";
  // Name a group size that runs: PyTorch's round size where it is sound, else one group.
  const int pt = pytorch_group_size(d, n);
  if (pt != 0 && pt != g && unsound(build(p, d, n, v, pt)).empty())
    why += "; --group-size " + std::to_string(pt) + " (PyTorch's N/max(1, N div D)) runs";
  else if (n != g && unsound(build(p, d, n, v, n)).empty())
    why += "; --group-size " + std::to_string(n) + " (one group) runs";
  require(false,
          "interleaved-1f1b deadlocks for D=" + std::to_string(d) + ", N=" + std::to_string(n) +
              ", --chunks " + std::to_string(v) + ", group size " + std::to_string(g) +
              (p.group_size == 0 ? " (the default)" : "") + ": " + why + " (" + deadlock + ")");
  return s;
}

ClosedForm closed_form_interleaved_1f1b(const ScheduleParams& p, const UniformCost& c) {
  const int d = p.devices, n = p.microbatches;
  const int v = p.chunks == 0 ? 2 : p.chunks;
  const int g = p.group_size == 0 ? default_group_size(d, n) : p.group_size;
  ClosedForm out;
  out.bubble_formula =
      "(D-1)/(D-1+vN) when D <= g and g divides N; (v(D-N)+N-1)/(vD+N-1) when g = N < D";
  out.idle_formula = "(D-1)(F+B) when D <= g and g divides N; (D-1+(v-1)(D-N))(F+B) when g = N < D";
  if (g >= d && n % g == 0) {
    out.bubble_fraction = (d - 1.0) / (d - 1.0 + v * n);
    out.idle_per_rank = (d - 1) * (c.f + c.b);
  } else if (g == n) {
    // One group of N < D micro-batches (PyTorch's single round): a rank's N forwards of a
    // chunk end before micro-batch 0 comes back for the next chunk, so the order runs as GPipe
    // over the vD stages: makespan (vD+N-1)(F+B) against vN(F+B) of work.
    const double idle = d - 1.0 + (v - 1.0) * (d - n);
    out.bubble_fraction = idle / (idle + v * n);
    out.idle_per_rank = idle * (c.f + c.b);
  } else if (g < d) {
    out.note = "the group size g = " + std::to_string(g) + " is below D = " + std::to_string(d) +
               " and there is more than one group: no closed form is claimed (one holds for "
               "D <= g with g dividing N, and for g = N < D)";
  } else {
    // The table ends with a short group: its chunks cannot fill the pipeline, and the ranks
    // wait about as long as 1F1B's warm-up again (D = 4, N = 13, g = 4: 0.204 against plain
    // 1F1B's 0.1875), so the closed form does not hold. A group of all N micro-batches has no
    // short group (--group-size N: 0.103 there).
    out.note = "N = " + std::to_string(n) +
               " is not a multiple of the group size g = " + std::to_string(g) +
               ": the last group is short, the closed form does not hold, and "
               "the bubble can exceed plain 1F1B's; --group-size " +
               std::to_string(n) + " (one group) avoids the short group";
  }
  return out;
}

}  // namespace ppbench
