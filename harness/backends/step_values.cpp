#include "harness/backends/step_values.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ppbench {

double StepValues::grad_norm() const {
  double s = 0;
  for (const PartGradients& p : parts) s += p.sum_squares;
  return std::sqrt(s);
}

double StepValues::grad_sum() const {
  double s = 0;
  for (const PartGradients& p : parts) s += p.sum;
  return s;
}

std::int64_t StepValues::grad_elements() const {
  std::int64_t n = 0;
  for (const PartGradients& p : parts) n += p.elements;
  return n;
}

nlohmann::json StepValues::gradients_json() const {
  nlohmann::json ps = nlohmann::json::array();
  for (const PartGradients& p : parts)
    ps.push_back({{"part", p.part},
                  {"norm", std::sqrt(p.sum_squares)},
                  {"sum", p.sum},
                  {"elements", p.elements}});
  return {{"norm", grad_norm()}, {"sum", grad_sum()}, {"elements", grad_elements()}, {"parts", ps}};
}

void accumulate(PartGradients& part, const double* values, std::size_t n) {
  double sq = 0, sum = 0;
  for (std::size_t i = 0; i < n; ++i) sq += values[i] * values[i], sum += values[i];
  part.sum_squares += sq;
  part.sum += sum;
  part.elements += static_cast<std::int64_t>(n);
}

std::string grad_tensor_name(const WorkloadSpec& spec, int layer, int k, const std::string& param) {
  return "layer " + std::to_string(layer) + " (" +
         spec.layers.at(static_cast<std::size_t>(layer)).name + ") tensor " + std::to_string(k) +
         " (" + param + ")";
}

GradientComparison compare_gradients(const std::vector<GradTensor>& got,
                                     const std::vector<GradTensor>& want) {
  GradientComparison c;
  c.tensors = want.size();
  if (got.size() != want.size()) {
    c.mismatch = std::to_string(got.size()) + " gradient tensors against " +
                 std::to_string(want.size()) + " in the reference";
    return c;
  }
  double largest_rms = 0;
  for (const GradTensor& w : want) {
    double sq = 0;
    for (double v : w.values) sq += v * v;
    if (!w.values.empty())
      largest_rms = std::max(largest_rms, std::sqrt(sq / static_cast<double>(w.values.size())));
  }
  const double floor = kGradientScaleFloor * largest_rms;
  for (std::size_t t = 0; t < want.size(); ++t) {
    const GradTensor &g = got[t], &w = want[t];
    if (g.values.size() != w.values.size()) {
      c.mismatch = w.name + ": " + std::to_string(g.values.size()) + " elements against " +
                   std::to_string(w.values.size());
      return c;
    }
    double diff = 0, scale = 0;
    bool nan = false;
    for (std::size_t i = 0; i < w.values.size(); ++i) {
      const double d = std::abs(g.values[i] - w.values[i]);
      nan = nan || std::isnan(d);
      diff = std::max(diff, d);
      scale = std::max(scale, std::abs(w.values[i]));
    }
    scale = std::max(scale, floor);
    // NaN never passes: a NaN anywhere is the worst error there is.
    const double err = nan          ? std::numeric_limits<double>::infinity()
                       : diff == 0  ? 0.0
                       : scale == 0 ? std::numeric_limits<double>::infinity()
                                    : diff / scale;
    if (c.worst_tensor.empty() || err > c.max_rel_error)
      c.max_rel_error = err, c.worst_tensor = w.name;
  }
  return c;
}

double check_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return 1e-10;
    case DType::kF32:
      return 1e-4;
    case DType::kBF16:
      return 2e-2;
  }
  return 0;
}

nlohmann::json check_json(const GradientComparison& c, double tolerance, double loss,
                          double reference_loss, const std::string& reference,
                          const ReferenceSpread* spread) {
  const double loss_error =
      std::abs(loss - reference_loss) / std::max(std::abs(reference_loss), 1e-300);
  const double grad_tolerance =
      spread ? widened_tolerance(tolerance, spread->gradients) : tolerance;
  const double loss_tolerance = spread ? widened_tolerance(tolerance, spread->loss) : tolerance;
  const bool passed = c.within(grad_tolerance) && loss_error <= loss_tolerance;
  nlohmann::json j = {
      {"reference", reference},
      {"tensors", c.tensors},
      {"max_rel_error",
       std::isfinite(c.max_rel_error) ? nlohmann::json(c.max_rel_error) : nlohmann::json("inf")},
      {"worst_tensor", c.worst_tensor},
      {"loss_rel_error", loss_error},
      {"tolerance", tolerance},
      {"passed", passed}};
  if (!c.mismatch.empty()) j["mismatch"] = c.mismatch;
  if (spread)
    j["reference_spread"] = {
        {"gradients", spread->gradients},   {"loss", spread->loss},
        {"perturbation", spread->relative}, {"runs", kPerturbedReferenceRuns},
        {"precision", spread->precision},   {"gradient_tolerance", grad_tolerance},
        {"loss_tolerance", loss_tolerance}};
  if (spread && reference_unjudgeable(spread->gradients))
    not_judged(j, "one rounding of its start moves the single-device step by " +
                      nlohmann::json(spread->gradients).dump() +
                      ", past what a comparison can tell from an error (the optimizer's steps "
                      "amplify rounding noise into full-size updates)");
  return j;
}

void not_judged(nlohmann::json& check, const std::string& why) {
  check["judged"] = false;
  check["not_judged"] = why;
}

bool finite_values(const StepValues& v) {
  if (!std::isfinite(v.loss)) return false;
  for (const GradTensor& t : v.tensors)
    for (double x : t.values)
      if (!std::isfinite(x)) return false;
  return true;
}

bool spread_may_explain(const nlohmann::json& check, const GradientComparison& c,
                        double user_tolerance) {
  return !check["passed"].get<bool>() && c.mismatch.empty() && user_tolerance <= 0;
}

namespace {

// Why check json `c` (one step's comparison, check_json's) failed, in one line.
std::string comparison_failure(const nlohmann::json& c) {
  if (c.contains("mismatch"))
    return "--check failed: the gradients do not match the reference's tensors (" +
           c["mismatch"].get<std::string>() + ")";
  std::string tolerance = c["tolerance"].dump();
  if (c.contains("reference_spread"))
    tolerance += ", or " + c["reference_spread"]["gradient_tolerance"].dump() +
                 " for gradients and " + c["reference_spread"]["loss_tolerance"].dump() +
                 " for the loss (" + std::to_string(static_cast<int>(kReferenceSpreadFactor)) +
                 "x how far the single-device step in " +
                 c["reference_spread"].value("precision", std::string("f64")) +
                 ", started one rounding away, lands from the reference)";
  return "--check failed: largest relative gradient error " + c["max_rel_error"].dump() + " in " +
         c["worst_tensor"].get<std::string>() + ", loss error " + c["loss_rel_error"].dump() +
         ", tolerance " + tolerance + " (against " + c["reference"].get<std::string>() + ")";
}

}  // namespace

std::string check_failure(const nlohmann::json& record) {
  if (!record.contains("check") || record["check"].value("passed", false)) return "";
  const nlohmann::json& c = record["check"];
  // The last step could not be judged and the first decided: its failure is the one to name.
  if (c.contains("first_step"))
    return comparison_failure(c["first_step"]) +
           "; the last step cannot be judged: " + c.value("not_judged", std::string());
  return comparison_failure(c);
}

}  // namespace ppbench
