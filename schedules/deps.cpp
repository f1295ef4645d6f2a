#include "schedules/deps.h"

namespace ppbench {

TaskIndex::TaskIndex(const Placement& p) : base_(p.stages()), ends_(p.stages()) {
  std::size_t rows = 0;
  for (int s = 0; s < p.stages(); ++s) {
    ends_[s] = static_cast<std::uint8_t>((p.is_first(s) ? 1 : 0) | (p.is_last(s) ? 2 : 0));
    base_[s] = rows;
    rows += static_cast<std::size_t>(p.microbatches_of(s));
  }
  size_ = rows * 3;
}

}  // namespace ppbench
