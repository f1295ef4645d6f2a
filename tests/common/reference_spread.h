// Judging a result computed in a working precision (f32, bf16) against the float64 reference,
// when the reference itself is not stable at that precision.
//
// Why: a model with ReLUs, max-pools and BatchNorm over few values has gradients that move by
// far more than one rounding when its inputs move by one rounding: a pre-activation near zero
// changes sign, a max-pool's winner changes, and that element's gradient jumps by its whole size.
// Measured on the CPU for the AmoebaNet cells of the GPU tests: perturbing parameters and inputs
// by bf16's unit roundoff (2^-8) moves some gradient tensors by 10-30 % (norm-wise), so no
// correct bf16 implementation can meet a fixed 2 % against float64 there; at f32's 2^-24 the same
// cells move by 1e-6, linearly. A fixed tolerance is then either too tight to pass or too loose to
// catch anything elsewhere.
//
// How: the reference is computed once as is and kPerturbedRuns more times with every parameter
// and input perturbed by x (1 + u xi), u the working precision's unit roundoff, xi uniform in
// [-1, 1) (single_device_step's ReferencePerturbation; the unit tests do the same by hand). The
// spread of a quantity is the largest error of a perturbed run against the plain one; a result
// passes if its error is within max(base tolerance, min(kReferenceSpreadCeiling, kSpreadFactor x
// spread)) (widened_tolerance). kSpreadFactor leaves room for what the perturbation leaves out: a
// real run rounds every intermediate too, not only its inputs; the ceiling (0.5) fails a result
// of zeros (error 1) however unstable the reference. A wrong kernel (a missing term, a wrong index,
// garbage) still misses by far more than that wherever the reference is stable, and the f32 run of
// the same test, whose spread is tiny, judges every tensor strictly.
//
// The error is norm-wise, ||got - ref||_2 / scale: one element whose ReLU flipped weighs as one
// element of the tensor, not as the whole tensor. The scale is the reference's own norm, but never
// less than kFloorFraction of what the tensor's norm would be if its elements were as large as the
// largest root-mean-square element of the set: a gradient that cancels to (nearly) zero, such as a
// BatchNorm beta whose every path is normalised again, is judged against the size of the terms
// it sums, since the rounding of those terms, not the exact sum, sets its error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "harness/backends/step_values.h"
#include "workloads/layer_spec.h"

namespace ppbench::precision {

using ppbench::unit_roundoff;  // workloads/layer_spec.h

// The same rule as run --check's (harness/backends/step_values.h).
inline constexpr int kPerturbedRuns = kPerturbedReferenceRuns;
inline constexpr double kSpreadFactor = kReferenceSpreadFactor;
inline constexpr double kFloorFraction = kGradientScaleFloor;

struct Verdict {
  double error = 0, spread = 0, tolerance = 0;
  bool ok() const { return error <= tolerance; }  // false for NaN
};

// A set of quantities of one kind (the gradients of a unit, its outputs, a loss) with their
// plain reference values and the values of the perturbed runs.
class ReferenceSpread {
 public:
  ReferenceSpread(std::vector<std::vector<double>> reference,
                  const std::vector<std::vector<std::vector<double>>>& perturbed,
                  double base_tolerance)
      : reference_(std::move(reference)), base_(base_tolerance) {
    double largest_rms = 0;
    for (const std::vector<double>& r : reference_)
      if (!r.empty()) largest_rms = std::max(largest_rms, norm(r) / std::sqrt(double(r.size())));
    for (const std::vector<double>& r : reference_)
      scale_.push_back(
          std::max(norm(r), kFloorFraction * largest_rms * std::sqrt(double(r.size()))));
    spread_.assign(reference_.size(), 0.0);
    // A perturbed run that broke (NaN, wrong size) says nothing about rounding: it must not
    // widen the tolerance.
    for (const auto& run : perturbed)
      for (std::size_t i = 0; i < reference_.size() && i < run.size(); ++i)
        if (const double e = error(i, run[i]); std::isfinite(e))
          spread_[i] = std::max(spread_[i], e);
  }

  std::size_t size() const { return reference_.size(); }

  // ||got - ref||_2 / scale; infinity for NaN or a size mismatch, 0 where both are zero.
  double error(std::size_t i, std::span<const double> got) const {
    const std::vector<double>& r = reference_.at(i);
    if (got.size() != r.size()) return std::numeric_limits<double>::infinity();
    double d = 0;
    for (std::size_t k = 0; k < r.size(); ++k) d += (got[k] - r[k]) * (got[k] - r[k]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    if (d == 0) return 0;
    return scale_[i] > 0 ? std::sqrt(d) / scale_[i] : std::numeric_limits<double>::infinity();
  }

  Verdict judge(std::size_t i, std::span<const double> got) const {
    Verdict v;
    v.error = error(i, got);
    v.spread = spread_.at(i);
    v.tolerance = widened_tolerance(base_, v.spread);
    return v;
  }

 private:
  static double norm(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s);
  }

  std::vector<std::vector<double>> reference_;
  std::vector<double> scale_, spread_;
  double base_;
};

// "error 0.031 (tolerance 0.02, spread 0.004)", for failure messages.
inline std::string describe(const Verdict& v) {
  return "error " + std::to_string(v.error) + " (tolerance " + std::to_string(v.tolerance) +
         ", reference spread " + std::to_string(v.spread) + ")";
}

}  // namespace ppbench::precision
