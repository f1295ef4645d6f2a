#include "schedules/deps.h"

namespace ppbench {

TaskIndex::TaskIndex(const Placement& p) : stages_(p.stages()) {
  for (int s = 0; s < p.stages(); ++s) {
    stages_[s] = {rows_, p.stage_rank[s], p.microbatches_of(s),
                  static_cast<std::uint8_t>((p.is_first(s) ? 1 : 0) | (p.is_last(s) ? 2 : 0))};
    rows_ += static_cast<std::size_t>(p.microbatches_of(s));
  }
}

}  // namespace ppbench
