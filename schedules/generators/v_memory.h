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
#include <functional>
#include <string_view>

#include "schedules/formulas.h"
#include "schedules/schedule.h"

namespace ppbench {

// Slots of F0, F1, I1, I0 of micro-batch 0 on one rank, in a period of 6 slots.
using VBlock = std::array<int, 4>;

// The family's schedule on the V-shape placement, rank r's block being slots(r). Like the
// reference it takes any D >= 1 and N >= 1, and refuses others naming `family`.
Schedule v_memory_schedule(const ScheduleParams& p, std::string_view family,
                           const std::function<VBlock(int rank)>& slots);

// The families' closed form. The paper's table gives the bubble only as about `bubble` (F = I =
// W); the squeeze's exact idle has no closed form, so the simulator's figure stands. A rank holds
// `held` micro-batch activations M_B (`held_formula`, in D), each V stage M_B/2: twice as many
// chunk activations; fewer micro-batches than that hold all of theirs.
ClosedForm v_memory_closed_form(const ScheduleParams& p, std::string_view bubble,
                                std::string_view held_formula, int held);

}  // namespace ppbench
