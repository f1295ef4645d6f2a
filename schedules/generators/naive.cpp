// Naive model parallelism: each micro-batch goes forward through every stage
// and back before the next one starts, so exactly one rank works at a time.
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

}  // namespace ppbench
