// DualPipeV ("cut-in-half" DualPipe, as in Sea AI Lab's and DeepSeek's
// write-ups), written as DeepSeek's reference implementation orders it
// (deepseek-ai/DualPipe, dualpipe/dualpipev.py, DualPipeV.step), so that every
// rank's order matches the reference action by action.
//
// One chain of 2D stages folded into a V: rank r holds stage r (phase 0, on
// the way down) and stage 2D-1-r (phase 1, on the way back up), and all N
// micro-batches enter at rank 0. The eight steps are DualPipe's
// (dual_rank_program.h), counted over the rank and the rank count in place of
// DualPipe's half rank and half rank count; the last rank, where the V turns,
// plays the role of DualPipe's middle ranks.
//
// A backward "with zero bubble" runs only the input gradient (I) and queues its
// weight gradient; a later weight step runs the oldest queued one (the
// reference's WeightGradStore is a FIFO). Overlapped F&B pairs always carry a
// full backward (B).
#include <string>
#include <utility>
#include <vector>

#include "schedules/formulas.h"
#include "schedules/generators/dual_rank_program.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_dualpipev(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(n >= 2 * d, "dualpipev needs --microbatches N >= 2D, got N=" + std::to_string(n) +
                          ", D=" + std::to_string(d));

  Schedule s{p, Placement::v_shape(d, n), {}};
  s.ranks.resize(d);
  for (int r = 0; r < d; ++r) {
    s.ranks[r] =
        run_dual_steps(RankProgram(r, 2 * d - 1 - r), r, dual_step_counts(d, r, n), r == d - 1);
  }
  return s;
}

ClosedForm closed_form_dualpipev(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  // PP = 2D stages on D ranks: DualPipe on 2D ranks folded in half, with
  // the same idle under the same conditions (see "dualpipe"); every rank
  // does 2N forwards and backwards.
  out.bubble_formula = "idle / (idle + 2N(F+B)) with F&B = F+B, idle = (PP/2-1)(F&B+B-3W)";
  out.idle_formula = "(PP/2-1)(F&B+B-3W) on the most idle rank, PP = 2D stages";
  set_dual_idle(out, d - 1, 2 * n * (c.f + c.b), c);
  out.activations_formula = "PP+1 = 2D+1 on every rank";
  out.peak_activations = 2 * p.devices + 1;
  // The DualPipe paper's column: two stages of the PP-stage model per rank, twice 1F1B's on PP
  // ranks. Each stage is held once (param_copies 1): 1/D of the model per rank, as ZB-V.
  out.params_formula = "2x of 1F1B on PP = 2D ranks (one copy)";
  return out;
}

}  // namespace ppbench
