#include "schedules/deps.h"

namespace ppbench {

TaskIndex::TaskIndex(const Placement& p) : placement_(&p), base_(p.stages()) {
  std::size_t rows = 0;
  for (int s = 0; s < p.stages(); ++s) {
    base_[s] = rows;
    rows += static_cast<std::size_t>(p.microbatches_of(s));
  }
  size_ = rows * 3;
}

int TaskIndex::dependencies(const Task& t, std::array<Dep, 2>& out) const {
  const Placement& p = *placement_;
  int n = 0;
  switch (t.op) {
    case Op::F:
      if (!p.is_first(t.stage)) {
        Task prev{Op::F, t.stage - 1, t.mb};
        out[n++] = {id(prev), prev.stage, prev};
      }
      break;
    case Op::B:
    case Op::I: {
      Task own{Op::F, t.stage, t.mb};
      out[n++] = {id(own), own.stage, own};
      if (!p.is_last(t.stage)) {
        // Whichever of B or I the next stage runs; both fill the same slot.
        Task after{Op::B, t.stage + 1, t.mb};
        out[n++] = {id(after), after.stage, after};
      }
      break;
    }
    case Op::W: {
      Task input_grad{Op::I, t.stage, t.mb};
      out[n++] = {id(input_grad), input_grad.stage, input_grad};
      break;
    }
  }
  return n;
}

}  // namespace ppbench
