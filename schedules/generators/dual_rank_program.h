// The DualPipe family (DualPipe, DualPipeV) as DeepSeek's reference step() builds one rank's
// order: eight named steps, each repeated by the reference's count formula, over a rank program
// whose per-phase counters pick the micro-batch and whose zero-bubble backwards defer their W
// to a FIFO (the reference's WeightGradStore).
//
// The two schedules differ only in what the counts are taken of. DualPipe runs the steps on
// its half ranks (rank r and D-1-r alike) over the micro-batches of one direction (N/2);
// DualPipeV runs them on its ranks over all N micro-batches. With
//   ranks        = num_half_ranks (DualPipe) or num_ranks (DualPipeV),
//   rank         = half_rank or rank,
//   microbatches = the reference's half_num_chunks or num_chunks (it calls micro-batches
//                  chunks; here a chunk is only ever a model chunk, a stage of a rank),
// the reference's counts are the same formulas (dual_step_counts).
#pragma once

#include <deque>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "schedules/action.h"

namespace ppbench {

class RankProgram {
 public:
  RankProgram(int stage_of_phase0, int stage_of_phase1)
      : stage_{stage_of_phase0, stage_of_phase1} {}

  void forward(int phase) { out_.push_back(Action::single(next_forward(phase))); }

  void backward(int phase, bool zero_bubble = false) {
    Task t = next_backward(phase);
    if (zero_bubble) {
      t.op = Op::I;
      deferred_w_.push_back({Op::W, t.stage, t.mb});
    }
    out_.push_back(Action::single(t));
  }

  void weight() {
    if (deferred_w_.empty())
      throw std::logic_error("DualPipe step: a weight step with no deferred W queued");
    out_.push_back(Action::single(deferred_w_.front()));
    deferred_w_.pop_front();
  }

  void forward_backward(int forward_phase, int backward_phase) {
    const Task f = next_forward(forward_phase);
    out_.push_back(Action::pair(f, next_backward(backward_phase)));
  }

  // The rank's order; as in the reference, every deferred W must have run by then.
  std::vector<Action> take() {
    if (!deferred_w_.empty())
      throw std::logic_error("DualPipe step: " + std::to_string(deferred_w_.size()) +
                             " deferred W left in the queue after step 8");
    return std::move(out_);
  }

 private:
  Task next_forward(int phase) { return {Op::F, stage_[phase], forwards_[phase]++}; }
  Task next_backward(int phase) { return {Op::B, stage_[phase], backwards_[phase]++}; }

  int stage_[2];
  int forwards_[2] = {0, 0}, backwards_[2] = {0, 0};
  std::deque<Task> deferred_w_;
  std::vector<Action> out_;
};

// How often each of the reference's eight steps repeats on one rank.
struct DualStepCounts {
  int step_1, step_2, step_3, step_4, step_5, step_6, step_7, step_8;
};

inline DualStepCounts dual_step_counts(int ranks, int rank, int microbatches) {
  return {
      .step_1 = (ranks - rank - 1) * 2,
      .step_2 = rank + 1,
      .step_3 = ranks - rank - 1,
      .step_4 = microbatches - 2 * ranks + rank + 1,
      .step_5 = ranks - rank - 1,
      .step_6 = rank + 1,
      .step_7 = ranks - rank - 1,
      .step_8 = rank + 1,
  };
}

// The eight steps on `program`. `rank` (the half rank for DualPipe) sets the parity of step 6's
// switch to zero bubble; `turning` is the rank where the two directions meet (DualPipe's middle
// ranks, DualPipeV's last rank), which does not overlap its first F0 and B1 (the reference's
// note: it shrinks the bubble further).
inline std::vector<Action> run_dual_steps(RankProgram rank_program, int rank,
                                          const DualStepCounts& n, bool turning) {
  RankProgram& p = rank_program;
  // Step 1: nF0
  for (int i = 0; i < n.step_1; ++i) p.forward(0);
  // Step 2: nF0F1
  for (int i = 0; i < n.step_2; ++i) {
    p.forward(0);
    p.forward(1);
  }
  // Step 3: nB1W1F1, zero bubble
  for (int i = 0; i < n.step_3; ++i) {
    p.backward(1, true);
    p.weight();
    p.forward(1);
  }
  // Step 4 (main): nF0B1F1B0
  for (int i = 0; i < n.step_4; ++i) {
    if (i == 0 && turning) {
      p.forward(0);
      p.backward(1);
    } else {
      p.forward_backward(0, 1);
    }
    p.forward_backward(1, 0);
  }
  // Step 5: nB1F1B0
  for (int i = 0; i < n.step_5; ++i) {
    p.backward(1);
    p.forward_backward(1, 0);
  }
  // Step 6: nB1B0; the second half of these backwards use zero bubble, switched on before B1
  // or before B0 depending on the parity of the rank.
  bool zero_bubble = false;
  for (int i = 0; i < n.step_6; ++i) {
    if (i == n.step_6 / 2 && rank % 2 == 1) zero_bubble = true;
    p.backward(1, zero_bubble);
    if (i == n.step_6 / 2 && rank % 2 == 0) zero_bubble = true;
    p.backward(0, zero_bubble);
  }
  // Step 7: nWB0, zero bubble
  for (int i = 0; i < n.step_7; ++i) {
    p.weight();
    p.backward(0, true);
  }
  // Step 8: nW, drains the queue
  for (int i = 0; i < n.step_8; ++i) p.weight();
  return p.take();
}

}  // namespace ppbench
