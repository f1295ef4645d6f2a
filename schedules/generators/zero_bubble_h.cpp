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

#include "schedules/formulas.h"
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

ClosedForm closed_form_zb_h1(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  // Every rank idles exactly this long (any N >= D) when W <= F and W <= I:
  // then each deferred W fits the gap it fills (found by sweeping costs).
  out.bubble_formula = "idle / (idle + N(F+I+W)), idle = (D-1)(F+I-W)";
  out.idle_formula = "(D-1)(F+I-W) when W <= F, I";
  if (c.w <= c.f && c.w <= c.i) {
    out.idle_per_rank = (d - 1) * (c.f + c.i - c.w);
    out.bubble_fraction = idle_fraction(*out.idle_per_rank, n * (c.f + c.i + c.w));
  }
  out.activations_formula = "D";
  out.peak_activations = p.devices;
  return out;
}

ClosedForm closed_form_zb_h2(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  // The paper's (D-1)(F+I-2W) is the idle inside each rank's own span (the
  // zb_bubble_rate measure), exact when W <= F and 2W <= F+I. The layout is a
  // parallelogram (rank r starts r*F late and ends late too), so of the
  // makespan every rank idles (D-1)(F + max(I-2W, 0)): the paper's figure
  // only when 2W <= I (found by sweeping costs; any N >= 2D-1).
  out.bubble_formula = "idle / (idle + N(F+I+W)), idle = (D-1)(F+max(I-2W,0))";
  out.idle_formula =
      "(D-1)(F+I-2W) within each rank's span (the paper's); of the makespan the same when 2W <= I";
  if (c.w <= c.f && 2 * c.w <= c.f + c.i) {
    const double makespan_idle = (d - 1) * (c.f + (c.i > 2 * c.w ? c.i - 2 * c.w : 0));
    out.bubble_fraction = idle_fraction(makespan_idle, n * (c.f + c.i + c.w));
    if (2 * c.w <= c.i) out.idle_per_rank = makespan_idle;
  }
  out.activations_formula = "2D-1";
  out.peak_activations = 2 * p.devices - 1;
  return out;
}

}  // namespace ppbench
