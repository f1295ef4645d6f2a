// DualPipeV ("cut-in-half" DualPipe, as in Sea AI Lab's and DeepSeek's
// write-ups), written as DeepSeek's reference implementation orders it
// (deepseek-ai/DualPipe, dualpipe/dualpipev.py, DualPipeV.step), so that every
// rank's order matches the reference action by action.
//
// One chain of 2D stages folded into a V: rank r holds stage r (phase 0, on
// the way down) and stage 2D-1-r (phase 1, on the way back up), and all N
// micro-batches enter at rank 0. The eight steps are DualPipe's, with the
// rank and the rank count in place of DualPipe's half rank and half rank
// count; the last rank, where the V turns, plays the role of DualPipe's
// middle ranks.
//
// A backward "with zero bubble" runs only the input gradient (I) and queues its
// weight gradient; a later weight step runs the oldest queued one (the
// reference's WeightGradStore is a FIFO). Overlapped F&B pairs always carry a
// full backward (B).
#include <string>
#include <utility>
#include <vector>

#include "schedules/generators/dual_rank_program.h"
#include "schedules/registry.h"

namespace ppbench {

Schedule generate_dualpipev(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(n >= 2 * d, "dualpipev needs --microbatches N >= 2D, got N=" + std::to_string(n) +
                          ", D=" + std::to_string(d));

  Schedule s{p, Placement::v_shape(d, n), {}};
  s.ranks.resize(d);
  for (int r = 0; r < d; ++r) {
    RankProgram rank(r, 2 * d - 1 - r);

    // Step 1: nF0
    for (int i = 0; i < (d - r - 1) * 2; ++i) rank.forward(0);
    // Step 2: nF0F1
    for (int i = 0; i < r + 1; ++i) {
      rank.forward(0);
      rank.forward(1);
    }
    // Step 3: nB1W1F1, zero bubble
    for (int i = 0; i < d - r - 1; ++i) {
      rank.backward(1, true);
      rank.weight();
      rank.forward(1);
    }
    // Step 4 (main): nF0B1F1B0. The last rank does not overlap its first F0
    // and B1, to shrink the bubble further (reference's note).
    for (int i = 0; i < n - 2 * d + r + 1; ++i) {
      if (i == 0 && r == d - 1) {
        rank.forward(0);
        rank.backward(1);
      } else {
        rank.forward_backward(0, 1);
      }
      rank.forward_backward(1, 0);
    }
    // Step 5: nB1F1B0
    for (int i = 0; i < d - r - 1; ++i) {
      rank.backward(1);
      rank.forward_backward(1, 0);
    }
    // Step 6: nB1B0; the second half of these backwards use zero bubble,
    // switched on before B1 or before B0 depending on the parity of r.
    const int step_6 = r + 1;
    bool zero_bubble = false;
    for (int i = 0; i < step_6; ++i) {
      if (i == step_6 / 2 && r % 2 == 1) zero_bubble = true;
      rank.backward(1, zero_bubble);
      if (i == step_6 / 2 && r % 2 == 0) zero_bubble = true;
      rank.backward(0, zero_bubble);
    }
    // Step 7: nWB0, zero bubble
    for (int i = 0; i < d - r - 1; ++i) {
      rank.weight();
      rank.backward(0, true);
    }
    // Step 8: nW, drains the queue
    for (int i = 0; i < r + 1; ++i) rank.weight();
    s.ranks[r] = rank.take();
  }
  return s;
}

}  // namespace ppbench
