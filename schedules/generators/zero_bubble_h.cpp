// The Zero Bubble paper's handcrafted schedules ZB-H1 and ZB-H2 (Qi et al.,
// "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2 and Figure 3).
// Backward is split into I (the paper's B, input gradient) and W (weight
// gradient); W has no dependents, so it can move to fill bubbles. W passes run
// oldest-first (the reference's FIFO WeightGradStore).
//
// ZB-H1 (memory of 1F1B): Megatron's 1F1B warm-up of D-r-1 forwards, then
// F I pairs, with each rank's W passes delayed by r steady iterations ("delay W
// by rank"), then the cool-down I W, then the r pending W. This is the order
// of the reference's ZB-H1 (sail-sg zb-h1-quick-start's schedules.py, and the
// DeepSpeed ZeroBubbleH1Pipeline with exact semantics), with every backward
// split; rank 0 therefore runs I W back to back where the reference keeps one
// fused B. Peak D in-flight micro-batches on every rank; needs N >= D.
//
// ZB-H2 (zero bubble for 2D-1 activations): the reference has no fixed order
// for it (its ZB-2p comes from a heuristic search with a memory limit), so
// this is Figure 3's construction. The warm-up grows to 2(D-r)-1 forwards,
// exactly what fits before the first I reaches rank r when F = I = W; the
// steady state runs I W F; the last 2r steady iterations skip their W, and the
// cool-down runs I W followed by those 2r W. Deferring those W to the tail is
// the paper's "reorder the W passes at the tail": rank r's busy span becomes
// [r, r + N(F+I+W)), a parallelogram. Peak 2D-1 on every rank; needs N >= 2D-1
// (Figure 3's warm-up must fit).
#include <string>

#include "schedules/registry.h"

namespace ppbench {

namespace {

// Appends one rank's actions; W passes are emitted oldest-first.
struct RankOrder {
  std::vector<Action>& out;
  int stage;
  int next_w = 0;

  void f(int mb) { out.push_back(Action::single(Op::F, stage, mb)); }
  void i(int mb) { out.push_back(Action::single(Op::I, stage, mb)); }
  void w() { out.push_back(Action::single(Op::W, stage, next_w++)); }
};

}  // namespace

Schedule generate_zb_h1(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(n >= d, "zb-h1 needs --microbatches >= --devices (N >= D, as 1F1B), got N=" +
                      std::to_string(n) + ", D=" + std::to_string(d));
  Schedule s{p, Placement::linear(d, n), {}};
  s.ranks.resize(d);
  for (int r = 0; r < d; ++r) {
    RankOrder o{s.ranks[r], r};
    const int warmup = d - r - 1;
    const int steady = n - warmup;
    for (int m = 0; m < warmup; ++m) o.f(m);
    for (int k = 0; k < steady; ++k) {
      o.f(warmup + k);
      o.i(k);
      if (k >= r) o.w();  // W delayed by r: rank r keeps D micro-batches alive, as 1F1B's rank 0
    }
    for (int m = steady; m < n; ++m) {
      o.i(m);
      o.w();
    }
    while (o.next_w < n) o.w();
  }
  return s;
}

Schedule generate_zb_h2(const ScheduleParams& p) {
  const int d = p.devices, n = p.microbatches;
  require(n >= 2 * d - 1, "zb-h2 needs --microbatches >= 2*--devices - 1 (N >= 2D-1, its "
                          "warm-up), got N=" + std::to_string(n) + ", D=" + std::to_string(d));
  Schedule s{p, Placement::linear(d, n), {}};
  s.ranks.resize(d);
  for (int r = 0; r < d; ++r) {
    RankOrder o{s.ranks[r], r};
    const int warmup = 2 * (d - r) - 1;
    const int steady = n - warmup;
    for (int m = 0; m < warmup; ++m) o.f(m);
    for (int k = 0; k < steady; ++k) {
      o.i(k);
      if (k < steady - 2 * r) o.w();  // the last 2r W move to the tail
      o.f(warmup + k);
    }
    for (int m = steady; m < n; ++m) {
      o.i(m);
      o.w();
    }
    while (o.next_w < n) o.w();
  }
  return s;
}

}  // namespace ppbench
