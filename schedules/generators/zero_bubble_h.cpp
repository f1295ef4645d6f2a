// The Zero Bubble paper's handcrafted schedules ZB-H1 and ZB-H2 (Qi et al.,
// "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2 and Figure 3).
// Backward is split into I (the paper's B, input gradient) and W (weight
// gradient); W has no dependents, so it can move to fill bubbles. W passes run
// oldest-first (the reference's FIFO WeightGradStore).
//
// ZB-H1 (memory of 1F1B): Megatron's 1F1B warm-up of D-r-1 forwards, then
// F I pairs with each rank's W delayed by r steady iterations ("delay W by
// rank"), then the cool-down I W, then the r pending W. This is the order of
// the authors' DeepSpeed port (microsoft/Megatron-DeepSpeed,
// megatron/core/pipeline_parallel/deepspeed_zbh1_schedule.py, with
// enable_zbh1_exact_semantics) and of Figure 3, except that the first stage
// there keeps a fused B where we write I W. The zb-h1-quick-start branch of
// sail-sg/zero-bubble-pipeline-parallelism times the same (it fuses I and W of
// steady micro-batches instead of running an older W). Peak D in flight on
// every rank; needs N >= D.
//
// ZB-H2 (zero bubble for 2D-1 activations): the reference has no fixed order
// for it (its ZB-2p comes from a heuristic search under a memory limit), so
// this is the paper's construction (section 2.2, Figure 3). The warm-up grows
// to 2(D-r)-1 forwards, exactly what fits before the first I reaches rank r
// when F = I = W; the steady state runs I W F; the last 2r steady iterations
// skip their W, and the cool-down runs I W followed by those 2r W. Moving those
// W to the tail is the paper's "reorder the W passes at the tail": with
// F = I = W = 1, rank r is busy without a gap from r to r + 3N, a
// parallelogram. Peak 2D-1 on every rank; needs N >= 2D-1 (the warm-up).
#include <string>
#include <vector>

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
  require(d >= 1, "zb-h1 needs --devices >= 1, got " + std::to_string(d));
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
  require(d >= 1, "zb-h2 needs --devices >= 1, got " + std::to_string(d));
  require(n >= 2 * d - 1, "zb-h2 needs --microbatches >= 2*--devices-1 (N >= 2D-1), got N=" +
                              std::to_string(n) + ", D=" + std::to_string(d));
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
