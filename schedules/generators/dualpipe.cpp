// DualPipe (DeepSeek-V3 technical report), written as DeepSeek's reference
// implementation orders it (deepseek-ai/DualPipe, dualpipe/dualpipe.py,
// DualPipe.step): eight named steps per rank, each with the reference's count
// formula, so that every rank's order matches the reference action by action.
//
// Micro-batches enter from both ends: chain 0 runs rank 0 -> D-1 and chain 1
// runs rank D-1 -> 0, N/2 micro-batches each. The reference speaks of two
// "phases" per rank, and on the second half of the ranks it swaps them, so
// phase 0 is always the direction that reaches the rank first. Ranks r and
// D-1-r ("half rank" h = min(r, D-1-r)) run the same step counts.
//
// A backward "with zero bubble" runs only the input gradient (I) and queues its
// weight gradient; a later weight step runs the oldest queued one (the
// reference's WeightGradStore is a FIFO). Overlapped F&B pairs always carry a
// full backward (B).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "schedules/generators/dual_rank_program.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_dualpipe(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(d % 2 == 0, "dualpipe needs an even --devices (D), got D=" + std::to_string(d));
  require(n % 2 == 0 && n >= 2 * d, "dualpipe needs an even --microbatches N >= 2D, got N=" +
                                        std::to_string(n) + ", D=" + std::to_string(d));
  const int half_ranks = d / 2, half_chunks = n / 2;

  Schedule s{p, Placement::bidirectional(d, half_chunks, half_chunks), {}};
  s.ranks.resize(d);
  for (int r = 0; r < d; ++r) {
    const int h = std::min(r, d - 1 - r);
    const bool second_half = r >= half_ranks;
    const bool middle = h == half_ranks - 1;
    // Chain 0 holds stage r here, chain 1 stage 2D-1-r; the second half of
    // the ranks sees chain 1 first, so its phase 0 is chain 1.
    const int down = r, up = 2 * d - 1 - r;
    RankProgram rank = second_half ? RankProgram(up, down) : RankProgram(down, up);

    // Step 1: nF0
    for (int i = 0; i < (half_ranks - h - 1) * 2; ++i) rank.forward(0);
    // Step 2: nF0F1
    for (int i = 0; i < h + 1; ++i) {
      rank.forward(0);
      rank.forward(1);
    }
    // Step 3: nB1W1F1, zero bubble
    for (int i = 0; i < half_ranks - h - 1; ++i) {
      rank.backward(1, true);
      rank.weight();
      rank.forward(1);
    }
    // Step 4 (main): nF0B1F1B0. The middle ranks do not overlap their first
    // F0 and B1, to shrink the bubble further (reference's note).
    for (int i = 0; i < half_chunks - d + h + 1; ++i) {
      if (i == 0 && middle) {
        rank.forward(0);
        rank.backward(1);
      } else {
        rank.forward_backward(0, 1);
      }
      rank.forward_backward(1, 0);
    }
    // Step 5: nB1F1B0
    for (int i = 0; i < half_ranks - h - 1; ++i) {
      rank.backward(1);
      rank.forward_backward(1, 0);
    }
    // Step 6: nB1B0; the second half of these backwards use zero bubble,
    // switched on before B1 or before B0 depending on the parity of h.
    const int step_6 = h + 1;
    bool zero_bubble = false;
    for (int i = 0; i < step_6; ++i) {
      if (i == step_6 / 2 && h % 2 == 1) zero_bubble = true;
      rank.backward(1, zero_bubble);
      if (i == step_6 / 2 && h % 2 == 0) zero_bubble = true;
      rank.backward(0, zero_bubble);
    }
    // Step 7: nWB0, zero bubble
    for (int i = 0; i < half_ranks - h - 1; ++i) {
      rank.weight();
      rank.backward(0, true);
    }
    // Step 8: nW, drains the queue
    for (int i = 0; i < h + 1; ++i) rank.weight();
    s.ranks[r] = rank.take();
  }
  return s;
}

}  // namespace ppbench
