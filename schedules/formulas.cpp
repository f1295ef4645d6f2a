#include "schedules/formulas.h"

#include "schedules/registry.h"

namespace ppbench {

int one_f_one_b_peak(int devices, int rank) { return devices - rank; }

ClosedForm closed_form(const ScheduleParams& p, const UniformCost& c) {
  return find_schedule(p.name).closed_form(p, c);
}

ClosedForm flush_closed_form(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  out.bubble_formula = "(D-1)/(D-1+N)";
  out.idle_formula = "(D-1)(F+B)";
  out.bubble_fraction = (d - 1) / (d - 1 + n);
  out.idle_per_rank = (d - 1) * (c.f + c.b);
  return out;
}

void set_dual_idle(ClosedForm& out, double half_pp_minus_one, double work, const UniformCost& c) {
  const bool as_drawn =
      c.i == c.f && c.w <= c.f && c.b == c.i + c.w && c.b <= c.fb && c.fb <= c.f + c.b;
  if (!as_drawn) return;
  out.idle_per_rank = half_pp_minus_one * (c.fb + c.b - 3 * c.w);
  if (c.fb == c.f + c.b) out.bubble_fraction = idle_fraction(*out.idle_per_rank, work);
}

}  // namespace ppbench
