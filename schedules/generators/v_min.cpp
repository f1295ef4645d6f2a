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
#include "schedules/formulas.h"
#include "schedules/generators/v_memory.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_v_min(const ScheduleParams& p) {
  const int d = p.devices, gap = d % 3 == 0 ? 2 : 0;
  return v_memory_schedule(p, "v-min", [&](int r) {
    return VBlock{r, 2 * d - r - 1, 2 * d + gap + r, 4 * d + gap - r - 1};
  });
}

// A rank holds (D+4)//3 micro-batch activations.
ClosedForm closed_form_v_min(const ScheduleParams& p, const UniformCost&) {
  return v_memory_closed_form(p, "2D/(3N)", "floor((D+4)/3)", (p.devices + 4) / 3);
}

}  // namespace ppbench
