// V-Half, the controllable-memory V schedule with about half of 1F1B's
// activation memory (Qi, Wan, Amar & Lin, "Pipeline Parallelism with
// Controllable Memory", NeurIPS 2024, arXiv 2405.15362, Sec. 4), built from its
// building block by the authors' greedy squeeze (v_memory.h;
// sail-sg/zero-bubble-pipeline-parallelism,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py,
// stable_pattern_v_half).
//
// Placement: the V of Placement::v_shape, as in the reference (chunk 0 is layer
// group r, chunk 1 is layer group 2D-1-r). The block puts F0, F1, I1, I0 of rank
// r at slots 2r, 3D-r-2, 3D+g+2r-1 and 6D+g-r-2 of a period of 6 slots, with a
// gap g = 3 when D is even (0 when odd) that keeps the passes of neighbouring
// micro-batches apart. The reference takes any D >= 1 and N >= 1. The planning
// costs and the memory limit do not change the order (v_memory.h).
#include "schedules/formulas.h"
#include "schedules/generators/v_memory.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_v_half(const ScheduleParams& p) {
  const int d = p.devices, gap = d % 2 == 0 ? 3 : 0;
  return v_memory_schedule(p, "v-half", [&](int r) {
    return VBlock{2 * r, 3 * d - r - 2, 3 * d + gap + 2 * r - 1, 6 * d + gap - r - 2};
  });
}

// A rank holds (D+2)//2 micro-batch activations.
ClosedForm closed_form_v_half(const ScheduleParams& p, const UniformCost&) {
  return v_memory_closed_form(p, "D/(2N)", "floor((D+2)/2)", (p.devices + 2) / 2);
}

}  // namespace ppbench
