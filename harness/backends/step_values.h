// What a training step computed, in a form every backend can produce without moving gradients
// off its devices, and every test and `--check` can compare:
//   - the mean loss over the step's micro-batches;
//   - per model part (the stage of one chain; the copies that Chimera and DualPipe keep are summed
//     first), the number of gradient elements, their sum of squares and their plain sum (a
//     checksum that does not depend on a backend's memory layout);
//   - the full gradients, per parameter tensor in the CPU backend's layout, only where a test or
//     `--check` asks for them (`keep_gradients`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/layer_spec.h"

namespace ppbench {

struct GradTensor {
  std::string name;  // "layer 3 (decoder.1) tensor 2 (weight)"
  int part = 0;
  std::vector<double> values;
};

struct PartGradients {
  int part = 0;
  std::int64_t elements = 0;
  double sum_squares = 0;
  double sum = 0;
};

struct StepValues {
  double loss = 0;
  std::vector<PartGradients> parts;  // in part order
  std::vector<GradTensor> tensors;   // in layer order; empty unless kept

  double grad_norm() const;
  double grad_sum() const;
  std::int64_t grad_elements() const;
  // {"norm", "sum", "elements", "parts": [{"part", "norm", "sum", "elements"}]} for records.
  nlohmann::json gradients_json() const;
};

// Adds one tensor's values to a part's statistics.
void accumulate(PartGradients& part, const double* values, std::size_t n);

// The name every backend gives parameter tensor `k` of layer `layer`, so that gradients of two
// backends can be matched tensor by tensor.
std::string grad_tensor_name(const WorkloadSpec& spec, int layer, int k, const std::string& param);

// Tensor by tensor: the relative error max_i |got_i - want_i| / scale (0 where both are zero),
// and the worst tensor. The scale is the tensor's largest element max_i |want_i|, but never less
// than kGradientScaleFloor times the largest root-mean-square element of any tensor of the step:
// a gradient that cancels to (nearly) zero, such as a BatchNorm beta whose every path is
// normalised again, is judged against the size of the terms it sums, since their rounding, not
// the exact sum, sets its error (a different summation order gave 1e-17 against 1e-17, "error 1").
// `mismatch` names the first tensor whose name or size differs (then the errors are not
// meaningful).
inline constexpr double kGradientScaleFloor = 0.1;

// Where a step misses its tolerance, how far a correct step in the run's precision lands from the
// reference: the single-device step is computed kPerturbedReferenceRuns more times in the run's
// own precision where the CPU has it (f32, f64; float64 for bf16), each from a start perturbed by
// one rounding of the run's dtype, and the step is held to max(tolerance, kReferenceSpreadFactor x
// the largest error of those against the reference) (measure_reference_spread,
// harness/backends/cpu/reference_step.h). Computing them in the run's precision matters: a
// float64 step perturbed at its start shows how far the start's rounding moves the step, not
// what rounding every intermediate does, which is all a gradient that cancels (BatchNorm's, below
// a layer that normalises it again) carries. The factor leaves room for the run's own summation
// order, which two samples do not bound.
inline constexpr int kPerturbedReferenceRuns = 3;
inline constexpr double kReferenceSpreadFactor = 4;
// The spread widens a tolerance to at most this while the reference itself holds within it: a
// result off by half its size, or all zeros (error 1), then fails whatever the spread, since it
// says that nothing was computed, not that a rounding moved the reference. Where one rounding of
// the start moves the reference itself by more than the ceiling (a chaotic multi-step run:
// AmoebaNet's BatchNorm over two values per channel after AdamW steps, which turn gradients of
// rounding noise into full-size updates; one rounding moved the reference by 1e3, a correct
// GPipe order by 0.7), that premise is false: the step's gradients cannot be judged, and the
// tolerance is kReferenceSpreadFactor x the spread, unbounded (the record says `judged`: false).
inline constexpr double kReferenceSpreadCeiling = 0.5;
// `tolerance` as the spread widens it: max(tolerance, min(ceiling, factor x spread)), or
// max(tolerance, factor x spread) where the spread itself is past the ceiling.
inline bool reference_unjudgeable(double spread) { return spread > kReferenceSpreadCeiling; }
inline double widened_tolerance(double tolerance, double spread) {
  if (reference_unjudgeable(spread)) return std::max(tolerance, kReferenceSpreadFactor * spread);
  return std::max(tolerance, std::min(kReferenceSpreadCeiling, kReferenceSpreadFactor * spread));
}
struct ReferenceSpread {
  double gradients = 0, loss = 0;  // the largest relative errors of the perturbed references
  double relative = 0;             // the perturbation: the dtype's unit roundoff
  std::string precision = "f64";   // what the perturbed references were computed in
};
struct GradientComparison {
  double max_rel_error = 0;
  std::string worst_tensor;
  std::size_t tensors = 0;
  std::string mismatch;
  bool within(double tolerance) const { return mismatch.empty() && max_rel_error <= tolerance; }
};
GradientComparison compare_gradients(const std::vector<GradTensor>& got,
                                     const std::vector<GradTensor>& want);

// The parameters of one stage on one rank, by layer: what a summary reads.
template <class Param>
struct StageParams {
  int rank = 0;
  int part = 0;
  std::vector<std::pair<int, std::vector<Param*>>> layers;  // (layer index, its parameters)
};

// Every parameter of a stage, in layer order.
template <class Param>
std::vector<Param*> all_params(const StageParams<Param>& s) {
  std::vector<Param*> out;
  for (const auto& [layer, params] : s.layers) out.insert(out.end(), params.begin(), params.end());
  return out;
}

// A step's gradient statistics (and, with `keep`, its gradient tensors) from every rank's stages,
// read on the host: `add(stage, param, out)` adds a parameter's gradient, in the CPU layout, into
// `out` (empty for the first copy: it sizes it). The copies of a part are summed in double before
// anything is counted.
template <class Param, class Add>
void summarize_gradients_on_host(const WorkloadSpec& spec,
                                 const std::vector<std::vector<StageParams<Param>>>& ranks,
                                 int parts, bool keep, StepValues& out, Add add) {
  out.parts.assign(static_cast<std::size_t>(parts), {});
  out.tensors.clear();
  std::vector<double> sum;
  for (int part = 0; part < parts; ++part) {
    out.parts[static_cast<std::size_t>(part)].part = part;
    std::vector<const StageParams<Param>*> copies;
    for (const auto& stages : ranks)
      for (const StageParams<Param>& s : stages)
        if (s.part == part) copies.push_back(&s);
    if (copies.empty()) continue;
    const StageParams<Param>& first = *copies.front();
    for (std::size_t l = 0; l < first.layers.size(); ++l) {
      const auto& [layer, params] = first.layers[l];
      for (std::size_t k = 0; k < params.size(); ++k) {
        sum.clear();
        for (const StageParams<Param>* c : copies) add(*c, c->layers.at(l).second.at(k), sum);
        accumulate(out.parts[static_cast<std::size_t>(part)], sum.data(), sum.size());
        if (keep)
          out.tensors.push_back(
              {grad_tensor_name(spec, layer, static_cast<int>(k), params[k]->name), part, sum});
      }
    }
  }
}

// Marks `check` (check_json's) as a step no comparison can judge, saying `why`: "judged" false,
// "not_judged" why ("passed" stays the caller's; a caller with more to compare, the first step,
// may decide it: cpu_check).
void not_judged(nlohmann::json& check, const std::string& why);

// Whether a step's loss and every gradient are finite: where the single-device step's are not
// (it overflowed), no comparison with it can judge a run.
bool finite_values(const StepValues& v);

// The `--check` tolerance of a dtype: f64 1e-10, f32 1e-4, bf16 2e-2 (max relative error per
// tensor against a float64 or same-dtype single-device step), before the spread widens it.
double check_tolerance(DType dtype);

// The message of a failed --check, or "" (the record's "check" object says why).
std::string check_failure(const nlohmann::json& record);

// Whether the reference's spread is worth measuring for `check` (check_json's object without a
// spread): only a miss pays for the perturbed references, and only one whose tensors match (a
// mismatch is a wrong layout, which no spread explains) under the dtype's default tolerance (one
// the user gave, `user_tolerance` > 0, is taken as given).
bool spread_may_explain(const nlohmann::json& check, const GradientComparison& c,
                        double user_tolerance);

// The record's "check" object. With `spread` (measured where the step missed `tolerance`), the
// gradients and the loss are each held to max(tolerance, kReferenceSpreadFactor x their spread),
// and the object says so ("reference_spread"); a spread past the ceiling leaves the step not
// judged (not_judged).
nlohmann::json check_json(const GradientComparison& c, double tolerance, double loss,
                          double reference_loss, const std::string& reference,
                          const ReferenceSpread* spread = nullptr);

}  // namespace ppbench
