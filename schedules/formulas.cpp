#include "schedules/formulas.h"

namespace ppbench {

namespace {

// bubble fraction from a per-rank idle time when every rank does `busy`.
double fraction(double idle, double busy) { return idle + busy > 0 ? idle / (idle + busy) : 0; }

}  // namespace

int one_f_one_b_peak(int devices, int rank) { return devices - rank; }

ClosedForm closed_form(const ScheduleParams& p, const UniformCost& c) {
  const double d = p.devices, n = p.microbatches;
  ClosedForm out;
  out.params_formula = "1x";
  const std::string& s = p.name;
  if (s == "naive") {
    out.bubble_formula = "(D-1)/D";
    out.idle_formula = "(D-1)N(F+B)";
    out.bubble_fraction = (d - 1) / d;
    out.idle_per_rank = (d - 1) * n * (c.f + c.b);
    out.activations_formula = "1";
    out.peak_activations = 1;
  } else if (s == "gpipe" || s == "1f1b") {
    out.bubble_formula = "(D-1)/(D-1+N)";
    out.idle_formula = "(D-1)(F+B)";
    out.bubble_fraction = (d - 1) / (d - 1 + n);
    out.idle_per_rank = (d - 1) * (c.f + c.b);
    out.activations_formula = s == "gpipe" ? "N" : "D-r on rank r";
    out.peak_activations = s == "gpipe" ? p.microbatches : p.devices;
  } else if (s == "interleaved-1f1b") {
    const double v = p.chunks;
    out.bubble_formula = "(D-1)/(D-1+vN)";
    out.idle_formula = "(D-1)(F+B)";
    out.bubble_fraction = (d - 1) / (d - 1 + v * n);
    out.idle_per_rank = (d - 1) * (c.f + c.b);
  } else if (s == "chimera") {
    // The paper counts slots of equal F and B: (D/2-1)(F+B) idle per rank for
    // any N = kD (direct concatenation). With F != B the units' bubbles stretch
    // and the paper gives no figure, so the numbers stay empty.
    out.bubble_formula = "(D-2)/(D-2+2N) with F = B";
    out.idle_formula = "(D/2-1)(F+B) with F = B";
    if (c.f == c.b) {
      out.bubble_fraction = (d - 2) / (d - 2 + 2 * n);
      out.idle_per_rank = (d / 2 - 1) * (c.f + c.b);
    }
    out.activations_formula = "between D/2+1 and D (D/2+1 at the ends, D in the middle)";
    out.peak_activations = p.devices;
    out.params_formula = "2x";
  } else if (s == "zb-h1") {
    // Every rank idles exactly this long (any N >= D) when W <= F and W <= I:
    // then each deferred W fits the gap it fills (found by sweeping costs).
    out.bubble_formula = "idle / (idle + N(F+I+W)), idle = (D-1)(F+I-W)";
    out.idle_formula = "(D-1)(F+I-W) when W <= F, I";
    if (c.w <= c.f && c.w <= c.i) {
      out.idle_per_rank = (d - 1) * (c.f + c.i - c.w);
      out.bubble_fraction = fraction(*out.idle_per_rank, n * (c.f + c.i + c.w));
    }
    out.activations_formula = "D";
    out.peak_activations = p.devices;
  } else if (s == "zb-h2") {
    // The paper's (D-1)(F+I-2W) is the idle inside each rank's own span (the
    // zb_bubble_rate measure), exact when W <= F and 2W <= F+I. The layout is a
    // parallelogram (rank r starts r*F late and ends late too), so of the
    // makespan every rank idles (D-1)(F + max(I-2W, 0)): the paper's figure
    // only when 2W <= I (found by sweeping costs; any N >= 2D-1).
    out.bubble_formula = "idle / (idle + N(F+I+W)), idle = (D-1)(F+max(I-2W,0))";
    out.idle_formula = "(D-1)(F+I-2W) within each rank's span (the paper's); of the makespan the same when 2W <= I";
    if (c.w <= c.f && 2 * c.w <= c.f + c.i) {
      const double makespan_idle = (d - 1) * (c.f + (c.i > 2 * c.w ? c.i - 2 * c.w : 0));
      out.bubble_fraction = fraction(makespan_idle, n * (c.f + c.i + c.w));
      if (2 * c.w <= c.i) out.idle_per_rank = makespan_idle;
    }
    out.activations_formula = "2D-1";
    out.peak_activations = 2 * p.devices - 1;
  } else if (s == "zb-v") {
    // Zero idle inside every rank's span (zb_bubble_rate = 0) when F = I = W
    // and N >= 2D-1 (below that the reference drops its padding micro-batches
    // and leaves bubbles). Rank r still starts r*F after rank 0 and ends as
    // much later, so of the makespan every rank idles (D-1)F.
    out.bubble_formula = "idle / (idle + 2N(F+I+W)), idle = (D-1)F of the makespan, 0 within each span, when F = I = W";
    out.idle_formula = "(D-1)F of the makespan, 0 within each rank's span, when F = I = W";
    if (c.f == c.i && c.i == c.w && n >= 2 * d - 1) {
      out.idle_per_rank = (d - 1) * c.f;
      out.bubble_fraction = fraction(*out.idle_per_rank, 2 * n * (c.f + c.i + c.w));
    }
    out.activations_formula = "2D chunk activations (D whole-stage equivalents)";
    out.peak_activations = 2 * p.devices;
  } else if (s == "dualpipe") {
    // The reference's order idles this long only when I = F, W <= F and
    // B <= FB <= F + B (found by sweeping costs in the simulator): on the
    // most idle (middle) ranks, and on every rank when overlapping saves
    // nothing (FB = F + B).
    out.bubble_formula = "idle / (idle + N(F+B)) with F&B = F+B, idle = (PP/2-1)(F&B+B-3W)";
    out.idle_formula = "(PP/2-1)(F&B+B-3W) on the most idle rank, PP = D";
    const bool as_drawn =
        c.i == c.f && c.w <= c.f && c.b == c.i + c.w && c.b <= c.fb && c.fb <= c.f + c.b;
    if (as_drawn) {
      out.idle_per_rank = (d / 2 - 1) * (c.fb + c.b - 3 * c.w);
      if (c.fb == c.f + c.b) out.bubble_fraction = fraction(*out.idle_per_rank, n * (c.f + c.b));
    }
    out.activations_formula = "PP+1 on every rank";
    out.peak_activations = p.devices + 1;
    out.params_formula = "2x";
  } else if (s == "dualpipev") {
    // PP = 2D stages on D ranks: DualPipe on 2D ranks folded in half, with
    // the same idle under the same conditions (see "dualpipe"); every rank
    // does 2N forwards and backwards.
    out.bubble_formula = "idle / (idle + 2N(F+B)) with F&B = F+B, idle = (PP/2-1)(F&B+B-3W)";
    out.idle_formula = "(PP/2-1)(F&B+B-3W) on the most idle rank, PP = 2D stages";
    const bool as_drawn =
        c.i == c.f && c.w <= c.f && c.b == c.i + c.w && c.b <= c.fb && c.fb <= c.f + c.b;
    if (as_drawn) {
      out.idle_per_rank = (d - 1) * (c.fb + c.b - 3 * c.w);
      if (c.fb == c.f + c.b)
        out.bubble_fraction = fraction(*out.idle_per_rank, 2 * n * (c.f + c.b));
    }
    out.activations_formula = "PP+1 = 2D+1 on every rank";
    out.peak_activations = 2 * p.devices + 1;
    out.params_formula = "2x";
  }
  return out;
}

}  // namespace ppbench
