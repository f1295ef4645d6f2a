// Naive model parallelism: each micro-batch goes forward through every stage
// and back before the next one starts, so exactly one rank works at a time.
#include "schedules/formulas.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_naive(const ScheduleParams& p) {
  Schedule s{p, Placement::linear(p.devices, p.microbatches), {}};
  s.ranks.resize(p.devices);
  for (int r = 0; r < p.devices; ++r)
    for (int m = 0; m < p.microbatches; ++m) {
      s.ranks[r].push_back(Action::single(Op::F, r, m));
      s.ranks[r].push_back(Action::single(Op::B, r, m));
    }
  return s;
}

ClosedForm closed_form_naive(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  out.bubble_formula = "(D-1)/D";
  out.idle_formula = "(D-1)N(F+B)";
  out.bubble_fraction = (d - 1) / d;
  out.idle_per_rank = (d - 1) * n * (c.f + c.b);
  out.activations_formula = "1";
  out.peak_activations = 1;
  return out;
}

}  // namespace ppbench
