// GPipe (Huang et al. 2019, Fig. 2c): every rank runs the forwards of all N
// micro-batches, then their backwards in reverse order, so the last
// micro-batch forwarded is the first one whose backward can start.
#include "schedules/formulas.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_gpipe(const ScheduleParams& p) {
  Schedule s{p, Placement::linear(p.devices, p.microbatches), {}};
  s.ranks.resize(p.devices);
  for (int r = 0; r < p.devices; ++r) {
    s.ranks[r].reserve(2 * static_cast<std::size_t>(p.microbatches));
    for (int m = 0; m < p.microbatches; ++m) s.ranks[r].push_back(Action::single(Op::F, r, m));
    for (int m = p.microbatches - 1; m >= 0; --m) s.ranks[r].push_back(Action::single(Op::B, r, m));
  }
  return s;
}

ClosedForm closed_form_gpipe(const ScheduleParams& p, const UniformCost& c) {
  ClosedForm out = flush_closed_form(p, c);
  out.activations_formula = "N";
  out.peak_activations = p.microbatches;
  return out;
}

}  // namespace ppbench
