// Chimera (Li & Hoefler, "Chimera: Efficiently Training Large-Scale Neural
// Networks with Bidirectional Pipelines", SC'21), as the authors' runtime
// orders it (Shigangli/Chimera, chimera_*/main_with_runtime_direct.py).
//
// Two pipelines over the same D ranks: "down" (stage s on rank s) and "up"
// (its stages reversed), N/2 micro-batches each. A basic unit injects D/2
// micro-batches into each direction. On rank r call "near" the pipeline in
// which r sits in the first half (down for r < D/2, up otherwise) and "far"
// the other; a = D/2 - (position of r in near), b = D/2 - a. One unit is
//   a F(near) | b x [F(far) F(near)] | a x [F(far) B(far)] | b x [B(near) B(far)]
// and a x B(near) after the last unit. With F = B that leaves D/2-1 forward and
// D/2-1 backward idle slots per rank: bubble (D-2)/(D-2+2N).
//
// N > D: the paper's direct concatenation of N/D units (its default; forward
// doubling, which needs recomputation, is not modelled). As in the reference,
// unit k > 0 opens with a x [B(near) F(near)]: the a backwards the previous
// unit leaves for its tail run there, one before each new forward of near.
#include <algorithm>
#include <vector>

#include "schedules/formulas.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_chimera(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(d >= 2 && d % 2 == 0,
          "chimera needs an even --devices >= 2 (half of each pipeline runs each way), got D=" +
              std::to_string(d));
  require(n >= d && n % d == 0,
          "chimera needs --microbatches a positive multiple of --devices (N = kD: k basic units "
          "of D/2 micro-batches per direction), got N=" +
              std::to_string(n) + ", D=" + std::to_string(d));

  Schedule s{p, Placement::bidirectional(d, n / 2, n / 2), {}};
  s.ranks.resize(d);
  const int half = d / 2, units = n / d;
  // Micro-batches enter each stage in order and leave its backward in order.
  std::vector<int> next_f(2 * d, 0), next_b(2 * d, 0);
  for (int r = 0; r < d; ++r) {
    auto& out = s.ranks[r];
    auto forward = [&](int stage) { out.push_back(Action::single(Op::F, stage, next_f[stage]++)); };
    auto backward = [&](int stage) {
      out.push_back(Action::single(Op::B, stage, next_b[stage]++));
    };
    const int down = r, up = 2 * d - 1 - r;  // up stage D+j lives on rank D-1-j
    const int near = r < half ? down : up, far = r < half ? up : down;
    const int a = half - std::min(r, d - 1 - r);
    const int b = half - a;
    for (int k = 0; k < units; ++k) {
      for (int i = 0; i < a; ++i) {
        if (k > 0) backward(near);
        forward(near);
      }
      for (int i = 0; i < b; ++i) forward(far), forward(near);
      for (int i = 0; i < a; ++i) forward(far), backward(far);
      for (int i = 0; i < b; ++i) backward(near), backward(far);
    }
    for (int i = 0; i < a; ++i) backward(near);
  }
  return s;
}

ClosedForm closed_form_chimera(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  // The paper counts slots of equal F and B: (D/2-1)(F+B) idle per rank for
  // any N = kD (direct concatenation). With F != B the units' bubbles stretch
  // and the paper gives no figure, so the numbers stay empty.
  out.bubble_formula = "(D-2)/(D-2+2N) with F = B";
  out.idle_formula = "(D/2-1)(F+B) with F = B";
  if (c.f == c.b) {
    out.bubble_fraction = (d - 2) / (d - 2 + 2 * n);
    out.idle_per_rank = (d / 2 - 1) * (c.f + c.b);
  }
  out.activations_formula = "between D/2+1 and D (D/2+1 at the ends, D in the middle)";
  out.peak_activations = p.devices;
  out.params_formula = "2x";
  return out;
}

}  // namespace ppbench
