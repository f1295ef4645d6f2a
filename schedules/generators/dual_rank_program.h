// One rank's action list for the DualPipe family (DualPipe, DualPipeV),
// built the way DeepSeek's reference step() calls its chunk functions.
#pragma once

#include <deque>
#include <utility>
#include <vector>

#include "schedules/action.h"

namespace ppbench {

// Per-phase forward and backward counters pick the
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


}  // namespace ppbench
