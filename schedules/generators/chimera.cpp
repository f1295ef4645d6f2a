// Chimera (Li & Hoefler, "Chimera: Efficiently Training Large-Scale Neural
// Networks with Bidirectional Pipelines", SC'21), as the authors' runtime
// orders it (Shigangli/Chimera, chimera_*/main_with_runtime_direct.py and
// main_with_runtime_forward_doubling.py).
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
// N > D, `chimera`: the paper's direct concatenation of N/D units. As in the
// reference, unit k > 0 opens with a x [B(near) F(near)]: the a backwards the
// previous unit leaves for its tail run there, one before each new forward of
// near.
//
// N > D, `chimera-doubling`: the paper's forward doubling.
// Every forward slot of a unit runs two micro-batches back to back, so that a
// doubled forward lasts about as long as a backward, and a unit takes D
// micro-batches per direction; the backwards it adds run in the unit's last
// phase, which grows from b to b + D/2 pairs:
//   a x [F F](near) | b x [F F](far) [F F](near) | a x [F F](far) B(far)
//   | (b + D/2) x [B(near) B(far)]
// unit k > 0 opening with a x [B(near) F F(near)]. Twice the forwards are in
// flight, which the paper pays for with recomputation (`run --recompute`).
#include <algorithm>
#include <vector>

#include "schedules/formulas.h"
#include "schedules/registry.h"

namespace ppbench {

namespace {

// `width` forwards per forward slot: 1 for direct concatenation, 2 for forward doubling.
Schedule chimera_order(const ScheduleParams& p, int width) {
  const int d = p.devices, n = p.microbatches;
  require(d >= 2 && d % 2 == 0, p.name +
                                    " needs an even --devices >= 2 (half of each pipeline runs "
                                    "each way), got D=" +
                                    std::to_string(d));
  const int per_unit = width * d;
  require(n >= per_unit && n % per_unit == 0,
          p.name + " needs --microbatches a positive multiple of " +
              (width == 1 ? std::string("--devices (N = kD: k basic units of D/2")
                          : std::string("2 x --devices (N = 2kD: k doubled units of D")) +
              " micro-batches per direction), got N=" + std::to_string(n) +
              ", D=" + std::to_string(d));

  Schedule s{p, Placement::bidirectional(d, n / 2, n / 2), {}};
  s.ranks.resize(d);
  const int half = d / 2, units = n / per_unit;
  // Micro-batches enter each stage in order and leave its backward in order.
  std::vector<int> next_f(2 * d, 0), next_b(2 * d, 0);
  for (int r = 0; r < d; ++r) {
    auto& out = s.ranks[r];
    auto forward = [&](int stage) {
      for (int i = 0; i < width; ++i) out.push_back(Action::single(Op::F, stage, next_f[stage]++));
    };
    auto backward = [&](int stage) {
      out.push_back(Action::single(Op::B, stage, next_b[stage]++));
    };
    const int down = r, up = 2 * d - 1 - r;  // up stage D+j lives on rank D-1-j
    const int near = r < half ? down : up, far = r < half ? up : down;
    const int a = half - std::min(r, d - 1 - r);
    const int b = half - a;
    // Each direction's backwards per unit equal its forwards, width * D/2: a of them run
    // before the next unit's forwards (or in the tail), the rest here.
    const int paired_backwards = width * half - a;
    for (int k = 0; k < units; ++k) {
      for (int i = 0; i < a; ++i) {
        if (k > 0) backward(near);
        forward(near);
      }
      for (int i = 0; i < b; ++i) forward(far), forward(near);
      for (int i = 0; i < a; ++i) forward(far), backward(far);
      for (int i = 0; i < paired_backwards; ++i) backward(near), backward(far);
    }
    for (int i = 0; i < a; ++i) backward(near);
  }
  return s;
}

}  // namespace

Schedule generate_chimera(const ScheduleParams& p) { return chimera_order(p, 1); }

Schedule generate_chimera_doubling(const ScheduleParams& p) { return chimera_order(p, 2); }

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

ClosedForm closed_form_chimera_doubling(const ScheduleParams&, const UniformCost&) {
  ClosedForm out;
  out.bubble_formula = "none published";
  out.idle_formula = "none published";
  out.note = "the paper gives no bubble or memory formula for forward doubling; simulate it";
  out.params_formula = "2x";
  return out;
}

}  // namespace ppbench
