// One check shared by the GPU executor's equivalence tests: run a step on the CUDA backend and
// compare its loss, its gradient norm and every parameter gradient, tensor by tensor (tensors
// matched by name in the CPU layout), with the CPU backend's float64 single-device step of the
// same seed; with an optimizer, the same number of steps each followed by its update. Used by
// tests/cuda_exec and tests/cuda (AmoebaNet).
//
// Each quantity passes within max(`tol`, 4 x the reference's own spread): the float64 step is
// also run with its parameters and inputs perturbed by one rounding of the run's dtype, and how
// far that moves each quantity is what rounding alone can do to it
// (tests/common/reference_spread.h says why a fixed tolerance cannot judge bf16 here).
#pragma once

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "harness/backends/cpu/cpu_run.h"
#include "harness/cuda/cuda_run.h"
#include "harness/optimizer.h"
#include "tests/common/reference_spread.h"

namespace ppbench {

// The float64 step and its perturbed repeats, as the quantities the tests judge: the loss, the
// gradient norm and the gradient tensors, three sets. The loss and the norm are each judged on
// their own scale: in one set, the floor of a tenth of the set's largest RMS would let a gradient
// norm of 40 loosen a loss of 1.5 many-fold.
struct ReferenceStep {
  StepValues plain;
  std::optional<precision::ReferenceSpread> loss, norm, tensors;
};

// Computed once per (workload, micro-batches, seed, steps, optimizer): the equivalence tests
// compare every schedule with the same step.
inline const ReferenceStep& reference_step(const WorkloadSpec& spec, int microbatches,
                                           std::uint64_t seed, int steps,
                                           const OptimizerOptions& optimizer, double tol) {
  static std::map<std::string, ReferenceStep> cache;
  const std::string key = spec.workload + spec.config.dump() + std::string(dtype_name(spec.dtype)) +
                          "/" + std::to_string(spec.microbatch_size) + "/" +
                          std::to_string(microbatches) + "/" + std::to_string(seed) + "/" +
                          std::to_string(steps) + "/" + optimizer_json(optimizer).dump() + "/" +
                          std::to_string(tol);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  ReferenceStep r;
  r.plain = single_device_step(spec, microbatches, seed, steps, optimizer);
  auto loss = [](const StepValues& v) { return std::vector<std::vector<double>>{{v.loss}}; };
  auto norm = [](const StepValues& v) { return std::vector<std::vector<double>>{{v.grad_norm()}}; };
  auto tensors = [](const StepValues& v) {
    std::vector<std::vector<double>> t;
    for (const GradTensor& g : v.tensors) t.push_back(g.values);
    return t;
  };
  std::vector<std::vector<std::vector<double>>> l, n, t;
  for (int k = 0; k < precision::kPerturbedRuns; ++k) {
    const ReferencePerturbation p{precision::unit_roundoff(spec.dtype), seed + 1000 + k};
    const StepValues v = single_device_step(spec, microbatches, seed, steps, optimizer, p);
    l.push_back(loss(v));
    n.push_back(norm(v));
    t.push_back(tensors(v));
  }
  r.loss.emplace(loss(r.plain), l, tol);
  r.norm.emplace(norm(r.plain), n, tol);
  r.tensors.emplace(tensors(r.plain), t, tol);
  return cache.emplace(key, std::move(r)).first->second;
}

// The run's output when it ran (whatever the comparison found), nullopt after a failure that
// threw (recorded with ADD_FAILURE, naming `label`).
inline std::optional<RunOutput> run_and_compare_with_cpu(const WorkloadSpec& spec,
                                                         const CudaRunOptions& o, double tol,
                                                         const std::string& label) {
  RunOutput out;
  CudaRunOptions keep = o;
  keep.run.keep_gradients = true;
  try {
    out = run_cuda(spec, keep);
  } catch (const std::exception& e) {
    ADD_FAILURE() << label << ": " << e.what();
    return std::nullopt;
  }
  // With an optimizer the compared gradients are the last step's, after every earlier step's
  // update: the reference takes as many steps (a graph run's warm-up is at least one step).
  const int eager = o.cuda_graph ? std::max(o.run.warmup, 1) : o.run.warmup;
  const int steps = o.run.optimizer.enabled() ? eager + o.run.steps : 1;
  const ReferenceStep& ref =
      reference_step(spec, o.run.schedule.microbatches, o.run.seed, steps, o.run.optimizer, tol);
  const precision::Verdict loss = ref.loss->judge(0, std::vector<double>{out.values.loss});
  EXPECT_TRUE(loss.ok()) << label << ": loss gpu " << out.values.loss << " cpu " << ref.plain.loss
                         << ", " << precision::describe(loss);
  const precision::Verdict norm = ref.norm->judge(0, std::vector<double>{out.values.grad_norm()});
  EXPECT_TRUE(norm.ok()) << label << ": gradient norm gpu " << out.values.grad_norm() << " cpu "
                         << ref.plain.grad_norm() << ", " << precision::describe(norm);
  const std::vector<GradTensor>& want = ref.plain.tensors;
  EXPECT_EQ(out.values.tensors.size(), want.size()) << label;
  for (std::size_t t = 0; t < want.size() && t < out.values.tensors.size(); ++t) {
    const GradTensor& got = out.values.tensors[t];
    EXPECT_EQ(got.name, want[t].name) << label;
    const precision::Verdict v = ref.tensors->judge(t, got.values);
    EXPECT_TRUE(v.ok()) << label << ": gradient " << want[t].name << ", " << precision::describe(v);
  }
  return out;
}

}  // namespace ppbench
