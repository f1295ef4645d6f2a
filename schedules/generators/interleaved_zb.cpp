// Interleaved zero bubble, in the order of PyTorch's
// ScheduleInterleavedZeroBubble (torch/distributed/pipelining/schedules.py,
// PyTorch 2.15: _calculate_single_rank_operations with _get_warmup_ops
// (multiply_factor 1) and _get_1f1b_rank_ops(enable_zero_bubble=True)). PyTorch
// calls it the ZB1P schedule of Qi et al., "Zero Bubble Pipeline Parallelism"
// (ICLR 2024), on interleaved stages.
//
// Rank r holds v stages, c*D + r. Micro-batches run in rounds:
// rounds = max(1, N / D) and P = N / rounds micro-batches per round, so N must
// be a multiple of the rounds. The k-th forward of a rank is for chunk
// (k / P) mod v, the j-th backward for chunk v-1 - (j / P) mod v; each chunk
// takes its micro-batches in order. Warm-up: (v-1)P + (D-1-r) forwards (at most
// vN): one forward per hop to the last rank where PyTorch's interleaved 1F1B
// takes two. Then one forward and one I per step; from step r of
// that phase on, each step also runs the oldest pending W (rank r delays W by
// r steps, ZB-H1's rule). The cool-down runs the remaining I, each with a W
// after the first r, and the W still pending come last.
//
// PyTorch then inserts idle slots where a forward's input is not yet there
// (_add_bubbles_to_actions); they change no rank's order, and ppbench's ranks
// just wait, so only the compute order is kept.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "core/error.h"
#include "schedules/formulas.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace ppbench {

namespace {

// Appends one rank's actions, numbering each stage's micro-batches in the
// order that stage's passes appear (PyTorch's per-stage counters).
class RankOrder {
 public:
  RankOrder(std::vector<Action>& out, int stages) : out_(out), f_(stages), i_(stages), w_(stages) {}

  void f(int stage) { out_.push_back(Action::single(Op::F, stage, f_[stage]++)); }
  void i(int stage) {
    out_.push_back(Action::single(Op::I, stage, i_[stage]++));
    pending_w_.push_back(stage);
  }
  // The oldest I without its W yet.
  void w() {
    const int stage = pending_w_.front();
    pending_w_.pop_front();
    out_.push_back(Action::single(Op::W, stage, w_[stage]++));
  }
  bool has_pending_w() const { return !pending_w_.empty(); }

 private:
  std::vector<Action>& out_;
  std::vector<int> f_, i_, w_;  // next micro-batch per stage
  std::deque<int> pending_w_;   // stages of the I passes whose W has not run
};

// PyTorch's rounds: max(1, N / D), each of N / rounds micro-batches, so N must divide evenly.
int rounds_of(int n, int d) { return std::max(1, n / d); }

bool whole_rounds(int n, int d) { return n % rounds_of(n, d) == 0; }

// The nearest N on `step`'s side of `n` that makes whole rounds. Every N < 2D is one round, so
// the search downwards ends there at the latest.
int nearest_whole_rounds(int n, int d, int step) {
  int m = n + step;
  while (!whole_rounds(m, d)) m += step;
  return m;
}

// With N = kD + m (k = floor(N/D) >= 2), k divides N exactly when it divides m: the rule in
// terms a reader can check, in the registry's words.
std::string rounds_refusal(int n, int d) {
  return "interleaved-zb needs --microbatches N to be a multiple of its rounds max(1, "
         "floor(N/D)) (PyTorch's rule), got N=" +
         std::to_string(n) + " with D=" + std::to_string(d) + ", " +
         std::to_string(rounds_of(n, d)) +
         " rounds (allowed: N < 2D, or N mod D a multiple of floor(N/D); nearest: N=" +
         std::to_string(nearest_whole_rounds(n, d, -1)) +
         " or N=" + std::to_string(nearest_whole_rounds(n, d, 1)) + ")";
}

}  // namespace

Schedule generate_interleaved_zb(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  const int v = p.chunks == 0 ? 2 : p.chunks;
  // PyTorch takes any number of local stages; with one it is ZB-H1-like.
  require(v >= 1, "interleaved-zb needs --chunks >= 1, got " + std::to_string(v));
  if (!whole_rounds(n, d)) throw UsageError(rounds_refusal(n, d));
  const int per_round = n / rounds_of(n, d);

  Schedule s{p, Placement::interleaved(d, v, n), {}};
  s.params.chunks = v;
  s.ranks.resize(d);
  const int total = v * n;  // forwards (and I, and W) per rank
  for (int r = 0; r < d; ++r) {
    RankOrder o(s.ranks[r], v * d);
    s.ranks[r].reserve(3 * static_cast<std::size_t>(total));
    const int warmup = std::min((v - 1) * per_round + (d - 1 - r), total);
    auto forward_stage = [&](int k) { return (k / per_round) % v * d + r; };
    auto backward_stage = [&](int j) { return (v - 1 - (j / per_round) % v) * d + r; };
    for (int k = 0; k < warmup; ++k) o.f(forward_stage(k));
    // Steady and cool-down: the j-th I, after the (warmup + j)-th forward while
    // forwards remain; W starts from the (r+1)-th I on.
    for (int j = 0; j < total; ++j) {
      if (warmup + j < total) o.f(forward_stage(warmup + j));
      o.i(backward_stage(j));
      if (j >= r) o.w();
    }
    while (o.has_pending_w()) o.w();
  }
  // PyTorch's runtime would hang on an order that deadlocks; say so instead.
  try {
    validate(s);
  } catch (const InvalidSchedule& e) {
    require(false, "interleaved-zb deadlocks for D=" + std::to_string(d) +
                       ", N=" + std::to_string(n) + ", --chunks " + std::to_string(v) + " (" +
                       e.what() + ")");
  }
  return s;
}

ClosedForm closed_form_interleaved_zb(const ScheduleParams&, const UniformCost&) {
  ClosedForm out;
  out.bubble_formula = "none claimed";
  out.idle_formula = "none claimed";
  out.note =
      "no closed form is claimed: PyTorch's order has no published bubble formula, and its idle "
      "time depends on F, I and W";
  return out;
}

}  // namespace ppbench
