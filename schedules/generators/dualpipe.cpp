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
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "schedules/registry.h"

namespace ppbench {

namespace {

// One rank's action list, built the way the reference's step() calls its
// chunk functions: per-phase forward and backward counters pick the
// micro-batch, and zero-bubble backwards defer their W to a FIFO.
class RankProgram {
 public:
  RankProgram(int stage_of_phase0, int stage_of_phase1)
      : stage_{stage_of_phase0, stage_of_phase1} {}

  void forward(int phase) { out_.push_back(Action{next_forward(phase), {}, false}); }

  void backward(int phase, bool zero_bubble = false) {
    Task t = next_backward(phase);
    if (zero_bubble) {
      t.op = Op::I;
      deferred_w_.push_back({Op::W, t.stage, t.mb});
    }
    out_.push_back(Action{t, {}, false});
  }

  void weight() {
    out_.push_back(Action{deferred_w_.front(), {}, false});
    deferred_w_.pop_front();
  }

  void forward_backward(int forward_phase, int backward_phase) {
    const Task f = next_forward(forward_phase);
    out_.push_back(Action::pair(f, next_backward(backward_phase)));
  }

  std::vector<Action> take() { return std::move(out_); }

 private:
  Task next_forward(int phase) { return {Op::F, stage_[phase], forwards_[phase]++}; }
  Task next_backward(int phase) { return {Op::B, stage_[phase], backwards_[phase]++}; }

  int stage_[2];
  int forwards_[2] = {0, 0}, backwards_[2] = {0, 0};
  std::deque<Task> deferred_w_;
  std::vector<Action> out_;
};

}  // namespace

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
