// V-Min, the controllable-memory V schedule with about a third of 1F1B's
// activation memory (Qi, Wan, Amar & Lin, "Pipeline Parallelism with
// Controllable Memory", NeurIPS 2024, arXiv 2405.15362, Sec. 4), built from its
// building block by the authors' greedy squeeze (v_memory.h;
// sail-sg/zero-bubble-pipeline-parallelism,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py,
// stable_pattern_v_min).
//
// Placement: the V of Placement::v_shape, as in the reference (chunk 0 is layer
// group r, chunk 1 is layer group 2D-1-r). The block puts F0, F1, I1, I0 of rank
// r at slots r, 2D-r-1, 2D+g+r and 4D+g-r-1 of a period of 6 slots, with a gap
// g = 2 when 3 divides D (0 otherwise) that keeps the passes of neighbouring
// micro-batches apart. The reference takes any D >= 1 and N >= 1. The planning
// costs and the memory limit do not change the order (v_memory.h).
#include <algorithm>
#include <string>
#include <vector>

#include "schedules/formulas.h"
#include "schedules/generators/v_memory.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_v_min(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(d >= 1, "v-min needs --devices >= 1, got " + std::to_string(d));
  require(n >= 1, "v-min needs --microbatches >= 1, got " + std::to_string(n));
  const int gap = d % 3 == 0 ? 2 : 0;
  std::vector<VBlock> block;
  for (int r = 0; r < d; ++r)
    block.push_back({r, 2 * d - r - 1, 2 * d + gap + r, 4 * d + gap - r - 1});
  return v_memory_schedule(p, block);
}

ClosedForm closed_form_v_min(const ScheduleParams& p, const UniformCost&) {
  const int d = p.devices, n = p.microbatches;
  ClosedForm out;
  // The paper's table gives the bubble only as about 2D/(3N) (F = I = W); the
  // squeeze's exact idle has no closed form, so the simulator's figure stands.
  out.bubble_formula = "about 2D/(3N) when F = I = W (paper, approximate)";
  out.note = "the bubble is the paper's approximation; simulate for the exact figure";
  // (D+4)//3 micro-batch activations M_B, each V stage holding M_B/2: twice as
  // many chunk activations. Fewer micro-batches than that hold all of theirs.
  out.activations_formula = "2 floor((D+4)/3) chunk activations (floor((D+4)/3) M_B), 2N if less";
  out.peak_activations = std::min(2 * n, 2 * ((d + 4) / 3));
  return out;
}

}  // namespace ppbench
