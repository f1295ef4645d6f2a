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

}  // namespace ppbench
