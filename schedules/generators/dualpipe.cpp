// DualPipe (DeepSeek-V3 technical report), written as DeepSeek's reference
// implementation orders it (deepseek-ai/DualPipe, dualpipe/dualpipe.py,
// DualPipe.step): its eight named steps per rank (dual_rank_program.h), each
// with the reference's count formula, so that every rank's order matches the
// reference action by action.
//
// Micro-batches enter from both ends: chain 0 runs rank 0 -> D-1 and chain 1
// runs rank D-1 -> 0, N/2 micro-batches each. The reference speaks of two
// "phases" per rank, and on the second half of the ranks it swaps them, so
// phase 0 is always the direction that reaches the rank first. Ranks r and
// D-1-r ("half rank" h = min(r, D-1-r)) run the same step counts.
//
// A backward "with zero bubble" runs only the input gradient (I) and queues its
// weight gradient; a later weight step runs the oldest queued one (the
// reference's WeightGradStore is a FIFO). Overlapped F&B pairs always carry a
// full backward (B).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "schedules/formulas.h"
#include "schedules/generators/dual_rank_program.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_dualpipe(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(d % 2 == 0, "dualpipe needs an even --devices (D), got D=" + std::to_string(d));
  require(n % 2 == 0 && n >= 2 * d, "dualpipe needs an even --microbatches N >= 2D, got N=" +
                                        std::to_string(n) + ", D=" + std::to_string(d));
  const int half_ranks = d / 2, half_microbatches = n / 2;

  Schedule s{p, Placement::bidirectional(d, half_microbatches, half_microbatches), {}};
  s.ranks.resize(d);
  for (int r = 0; r < d; ++r) {
    const int h = std::min(r, d - 1 - r);
    const bool second_half = r >= half_ranks;
    const bool middle = h == half_ranks - 1;
    // Chain 0 holds stage r here, chain 1 stage 2D-1-r; the second half of
    // the ranks sees chain 1 first, so its phase 0 is chain 1.
    const int down = r, up = 2 * d - 1 - r;
    s.ranks[r] = run_dual_steps(second_half ? RankProgram(up, down) : RankProgram(down, up), h,
                                dual_step_counts(half_ranks, h, half_microbatches), middle);
  }
  return s;
}

ClosedForm closed_form_dualpipe(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  out.bubble_formula = "idle / (idle + N(F+B)) with F&B = F+B, idle = (PP/2-1)(F&B+B-3W)";
  out.idle_formula = "(PP/2-1)(F&B+B-3W) on the most idle rank, PP = D";
  set_dual_idle(out, d / 2 - 1, n * (c.f + c.b), c);
  out.activations_formula = "PP+1 on every rank";
  out.peak_activations = p.devices + 1;
  out.params_formula = "2x";
  return out;
}

}  // namespace ppbench
