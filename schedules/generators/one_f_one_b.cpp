// 1F1B (PipeDream-Flush, DAPPLE) as Megatron-LM's non-interleaved schedule
// writes it: rank r runs D-r-1 warm-up forwards, then alternates one forward
// and one backward, then drains the remaining backwards.
#include "schedules/formulas.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_1f1b(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(n >= d, "1f1b needs --microbatches >= --devices (N >= D), got N=" + std::to_string(n) +
                      ", D=" + std::to_string(d));
  Schedule s{p, Placement::linear(d, n), {}};
  s.ranks.resize(d);
  for (int r = 0; r < d; ++r) {
    auto& out = s.ranks[r];
    out.reserve(2 * static_cast<std::size_t>(n));  // grown by doubling, it would fault twice over
    const int warmup = d - r - 1;
    const int steady = n - warmup;
    for (int m = 0; m < warmup; ++m) out.push_back(Action::single(Op::F, r, m));
    for (int k = 0; k < steady; ++k) {
      out.push_back(Action::single(Op::F, r, warmup + k));
      out.push_back(Action::single(Op::B, r, k));
    }
    for (int m = steady; m < n; ++m) out.push_back(Action::single(Op::B, r, m));
  }
  return s;
}

ClosedForm closed_form_1f1b(const ScheduleParams& p, const UniformCost& c) {
  ClosedForm out = flush_closed_form(p, c);
  out.activations_formula = "D-r on rank r";
  out.peak_activations = p.devices;
  return out;
}

}  // namespace ppbench
