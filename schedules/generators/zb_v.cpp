// ZB-V, the Zero Bubble authors' V-shaped schedule (Qi et al., "Zero Bubble
// Pipeline Parallelism", the ZB-V section of the revised paper), as their
// handcrafted generator writes it (sail-sg/zero-bubble-pipeline-parallelism,
// megatron/core/pipeline_parallel/handcrafted_zb_v; PyTorch's
// ScheduleZBVZeroBubble is a port of the same order).
//
// Rank r holds chunk 0 = stage r (the way down) and chunk 1 = stage 2D-1-r
// (the way up). Per rank:
//   warm-up  2(D-r)-1 x F0;  r x (F1 F0);  D-r x (F1 I1 W1)
//   steady   [F0] I0 W0 F1 I1 W1, until every F0 is issued and F1 caught up
//   cool-down r x (I0 I1);  D-r x (I0 W0);  then the pending W1, then W0
// The reference builds this for max(N, 2D-1) micro-batches and drops the
// passes of micro-batches >= N, so any N >= 1 is allowed; zero bubble when
// F = I = W needs the full warm-up, N >= 2D-1 (see the tests).
#include <algorithm>
#include <string>

#include "schedules/formulas.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_zb_v(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(d >= 1, "zb-v needs --devices >= 1, got " + std::to_string(d));
  require(n >= 1, "zb-v needs --microbatches >= 1, got " + std::to_string(n));
  Schedule s{p, Placement::v_shape(d, n), {}};
  s.ranks.resize(d);
  const int padded = std::max(n, 2 * d - 1);
  for (int r = 0; r < d; ++r) {
    auto& out = s.ranks[r];
    const int stage[2] = {r, 2 * d - 1 - r};
    int f[2] = {0, 0}, b[2] = {0, 0}, w[2] = {0, 0};  // next micro-batch per (op, chunk)
    auto emit = [&](Op op, int chunk, int& counter) {
      if (counter < n) out.push_back(Action::single(op, stage[chunk], counter));
      ++counter;
    };
    auto fwd = [&](int c) { emit(Op::F, c, f[c]); };
    auto inp = [&](int c) { emit(Op::I, c, b[c]); };
    auto wgt = [&](int c) { emit(Op::W, c, w[c]); };

    for (int k = 0; k < 2 * (d - r) - 1; ++k) fwd(0);
    for (int k = 0; k < r; ++k) fwd(1), fwd(0);
    for (int k = 0; k < d - r; ++k) fwd(1), inp(1), wgt(1);
    while (f[1] < f[0] || f[0] < padded) {
      if (f[0] < padded) fwd(0);
      inp(0), wgt(0);
      fwd(1), inp(1), wgt(1);
    }
    for (int k = 0; k < r; ++k) inp(0), inp(1);
    for (int k = 0; k < d - r; ++k) inp(0), wgt(0);
    while (w[1] < b[1]) wgt(1);
    while (w[0] < b[0]) wgt(0);
  }
  return s;
}

ClosedForm closed_form_zb_v(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  // Zero idle inside every rank's span (zb_bubble_rate = 0) when F = I = W
  // and N >= 2D-1 (below that the reference drops its padding micro-batches
  // and leaves bubbles). Rank r still starts r*F after rank 0 and ends as
  // much later, so of the makespan every rank idles (D-1)F.
  out.bubble_formula =
      "idle / (idle + 2N(F+I+W)), idle = (D-1)F of the makespan, 0 within each span, when F = I = "
      "W";
  out.idle_formula = "(D-1)F of the makespan, 0 within each rank's span, when F = I = W";
  if (c.f == c.i && c.i == c.w && n >= 2 * d - 1) {
    out.idle_per_rank = (d - 1) * c.f;
    out.bubble_fraction = idle_fraction(*out.idle_per_rank, 2 * n * (c.f + c.i + c.w));
  }
  // With N < D the warm-up holds every micro-batch's two chunks: 2N.
  out.activations_formula = "2D chunk activations (D whole-stage equivalents); 2N when N < D";
  out.peak_activations = 2 * std::min(p.devices, p.microbatches);
  return out;
}

}  // namespace ppbench
