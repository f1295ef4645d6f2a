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
    out.bubble_fraction = (d - 1) / d;
    out.idle_per_rank = (d - 1) * n * (c.f + c.b);
    out.activations_formula = "1";
    out.peak_activations = 1;
  } else if (s == "gpipe" || s == "1f1b") {
    out.bubble_formula = "(D-1)/(D-1+N)";
    out.bubble_fraction = (d - 1) / (d - 1 + n);
    out.idle_per_rank = (d - 1) * (c.f + c.b);
    out.activations_formula = s == "gpipe" ? "N" : "D-r on rank r";
    out.peak_activations = s == "gpipe" ? p.microbatches : p.devices;
  } else if (s == "interleaved-1f1b") {
    const double v = p.chunks;
    out.bubble_formula = "(D-1)/(D-1+vN)";
    out.bubble_fraction = (d - 1) / (d - 1 + v * n);
    out.idle_per_rank = (d - 1) * (c.f + c.b);
  } else if (s == "chimera") {
    // The paper counts slots of equal F and B: (D/2-1)(F+B) idle per rank for
    // any N = kD (direct concatenation). With F != B the units' bubbles stretch
    // and the paper gives no figure, so the numbers stay empty.
    out.bubble_formula = "(D-2)/(D-2+2N) with F = B";
    if (c.f == c.b) {
      out.bubble_fraction = (d - 2) / (d - 2 + 2 * n);
      out.idle_per_rank = (d / 2 - 1) * (c.f + c.b);
    }
    out.activations_formula = "between D/2+1 and D (D/2+1 at the ends, D in the middle)";
    out.peak_activations = p.devices;
    out.params_formula = "2x";
  } else if (s == "zb-h1") {
    out.bubble_formula = "(D-1)(F+I-W) idle per rank";
    out.idle_per_rank = (d - 1) * (c.f + c.i - c.w);
    out.bubble_fraction = fraction(*out.idle_per_rank, n * (c.f + c.i + c.w));
    out.activations_formula = "D";
    out.peak_activations = p.devices;
  } else if (s == "zb-h2") {
    out.bubble_formula = "(D-1)(F+I-2W) idle per rank";
    out.idle_per_rank = (d - 1) * (c.f + c.i - 2 * c.w);
    out.bubble_fraction = fraction(*out.idle_per_rank, n * (c.f + c.i + c.w));
    out.activations_formula = "2D-1";
    out.peak_activations = 2 * p.devices - 1;
  } else if (s == "zb-v") {
    out.bubble_formula = "0 when F = I = W";
    if (c.f == c.i && c.i == c.w) out.bubble_fraction = 0, out.idle_per_rank = 0;
    out.activations_formula = "2D chunk activations (D whole-stage equivalents)";
    out.peak_activations = 2 * p.devices;
  } else if (s == "dualpipe") {
    // The reference's order idles this long only when I = F, W <= F and
    // B <= FB <= F + B (found by sweeping costs in the simulator): on the
    // most idle (middle) ranks, and on every rank when overlapping saves
    // nothing (FB = F + B).
    out.bubble_formula = "(PP/2-1)(F&B+B-3W) idle on the most idle rank";
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
    out.bubble_formula = "(PP/2-1)(F&B+B-3W) idle on the most idle rank, PP = 2D stages";
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
