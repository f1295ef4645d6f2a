// The shared construction of the controllable-memory V schedules, v-half and
// v-min (Qi, Wan, Amar & Lin, "Pipeline Parallelism with Controllable Memory",
// NeurIPS 2024, arXiv 2405.15362), as the authors' greedy generator builds them
// (sail-sg/zero-bubble-pipeline-parallelism,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py).
//
// A family is given by its building block: for each rank, the slots of the
// four passes F0 F1 I1 I0 of micro-batch 0, where chunk 0 is stage r (the way
// down) and chunk 1 is stage 2D-1-r (the way up). Micro-batch m repeats the
// block 6m slots later. v_memory_schedule then does what the reference does:
//   1. fills each empty slot with a W while an I has no W yet;
//   2. walks all passes in slot order and moves each to the earliest free slot
//      its dependencies allow where the rank's peak memory stays within the
//      block's, except in the steady phase (from the first I0 of rank 0 up to
//      the last F0 of any rank), which keeps its slots; then starts every pass
//      as early as the rank order and the dependencies allow (unit lengths);
//   3. drops the W and does 2 again on the passes after the steady phase only,
//      a W now counting as run in any empty slot; refills the W and re-times;
//   4. drops the W, refills them per chunk (W1 first when both wait), and
//      orders each rank's passes by slot.
// Only slots are compared, so the order does not depend on the planning costs
// or on the memory limit (the reference scores the result with its costs, for
// its log only).
#pragma once

#include <array>
#include <vector>

#include "schedules/schedule.h"

namespace ppbench {

// Slots of F0, F1, I1, I0 of micro-batch 0 on one rank, in a period of 6 slots.
using VBlock = std::array<int, 4>;

// The family's schedule on the V-shape placement, one block per rank
// (block.size() == p.devices). The caller checks p.
Schedule v_memory_schedule(const ScheduleParams& p, const std::vector<VBlock>& block);

}  // namespace ppbench
