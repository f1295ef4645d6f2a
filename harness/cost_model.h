// Time of every action, per stage (docs/schedules.md, "Cost model").
//
// F, I, W per stage, B (full backward, = I + W unless given), FB (an
// overlapped forward/backward pair, = F + B unless given) and the time a
// dependent action on another rank waits after its producer ends (comm).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/action.h"

namespace ppbench {

// The largest cost (and --comm) the CLI takes: with N x D x (F + B) well under 1e300 no
// makespan can overflow to inf, and every sum stays exact enough to compare.
inline constexpr double kMaxCost = 1e12;
// The smallest cost --cost takes: a ratio of two times (bubble_ratio, comm against a cost) then
// stays below 1e24 x the action count, never inf.
inline constexpr double kMinCost = 1e-12;

struct StageCost {
  double f = 1, b = 2, i = 1, w = 1, fb = 3;
  double comm = 0;  // producer end -> consumer start, across ranks, on this stage's boundaries
  // The consumer's own time to take in each input from another rank, once the rank is free and
  // the input has arrived: it delays the action but is not busy time (a measured receive is
  // neither an action nor idle waiting; replay.h measures it, the CLI's costs leave it 0).
  double recv = 0;
  // Whether the hand-overs on this stage's boundaries across ranks go by rendezvous, as an MPI
  // library sends a message past its eager limit: the sender announces the tensor, the receiver
  // answers once it is at the action that needs it, and the tensor leaves (taking `comm`) only
  // when the sender's rank is next between actions, since a process moves a transfer only inside
  // its MPI calls. `handshake` is the one-way time of each of the two control messages. Without
  // it (eager), the tensor leaves as its producer ends.
  bool rendezvous = false;
  double handshake = 0;
  // The producer's own time handing one output to another rank across this stage's boundaries,
  // after the action (and before any optimizer step after it): its rank is not free again until
  // then, though the tensor is on its way from the action's end (LogP's sender overhead; 0
  // unless a measured step's replay or profile sets it).
  double send = 0;
};

// The flags of `--cost F=1,B=2,I=1,W=1,FB=3`, as given.
struct CostSpec {
  double f = 1, i = 1, w = 1;
  double b = -1, fb = -1;  // -1: derived
  bool has_b = false, has_i = false, has_w = false, has_fb = false;
};

// Parses "F=1,B=2,I=1,W=1,FB=3" (any subset, any order). Throws UsageError
// naming the bad entry for unknown or repeated keys, malformed numbers, and
// numbers that are not finite, below kMinCost or above kMaxCost.
CostSpec parse_cost_spec(std::string_view text);
// Applies the derivation rules: only B given -> I = W = B/2; I and W given ->
// B = I + W; B and one of I, W -> the other is B minus it (which must stay > 0);
// all three given -> B must equal I + W (to a relative 1e-9); FB = F + B. A given FB below
// max(F, B) is refused: no pair ends before its longer half would alone.
StageCost resolve(const CostSpec& spec, double comm);

class CostModel {
 public:
  CostModel() = default;
  CostModel(std::vector<StageCost> stages) : stages_(std::move(stages)) {}
  static CostModel uniform(int stages, const StageCost& c) {
    return {std::vector<StageCost>(stages, c)};
  }

  double time(const Task& t) const {
    const StageCost& c = stages_[t.stage];
    switch (t.op) {
      case Op::F:
        return c.f;
      case Op::B:
        return c.b;
      case Op::I:
        return c.i;
      case Op::W:
        return c.w;
    }
    return 0;
  }
  // An overlapped pair costs its two halves less what overlapping saves on its forward stage,
  // F + B - FB: exactly FB for an F+B pair when costs are uniform. Never less than its longer
  // half alone: the saving is B's, and an F+I pair (or halves of two stages of different costs)
  // has less to overlap, which would otherwise leave it shorter than one half, or negative.
  double time(const Action& a) const {
    if (!a.paired()) return time(a.task);
    const StageCost& c = stages_[a.task.stage];
    const double f = time(a.task), back = time(a.partner);
    return std::max(f + back - (c.f + c.b - c.fb), std::max(f, back));
  }
  // Delay between an action on `from` and a dependent one on `to` (adjacent
  // stages of a chain on different ranks).
  double comm(int from_stage, int to_stage) const {
    return stages_[from_stage < to_stage ? from_stage : to_stage].comm;
  }
  // What the consumer of a cross-rank input on `to_stage` spends taking it in.
  double recv(int to_stage) const { return stages_[to_stage].recv; }
  // What the producer of an output for another rank spends sending it, between adjacent stages.
  double send(int from_stage, int to_stage) const {
    return stages_[from_stage < to_stage ? from_stage : to_stage].send;
  }
  // The handshake of a rendezvous between adjacent stages on different ranks, or -1 where their
  // hand-overs are eager.
  double handshake(int from_stage, int to_stage) const {
    const StageCost& c = stages_[from_stage < to_stage ? from_stage : to_stage];
    return c.rendezvous ? c.handshake : -1;
  }
  const std::vector<StageCost>& stages() const { return stages_; }

 private:
  std::vector<StageCost> stages_;
};

}  // namespace ppbench
