// `ppbench run --backend cpu`: real training steps of a workload under a
// schedule, on CPU threads, with the measured and the predicted metrics.
//
// A step is forward and backward of N micro-batches with gradients accumulated, then, with
// an optimizer (RunOptions::optimizer), each stage's parameters updated after its last backward
// (once that backward's gradient is sent on): a step's loss and gradients must equal those of the
// same number of steps on a single device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/backends/run_options.h"
#include "harness/backends/step_values.h"
#include "workloads/layer_spec.h"

namespace ppbench {

// Throws UsageError for a workload the CPU backend cannot run: --dtype bf16, or a vocabulary or
// class count past what the run's dtype holds exactly (cpu::require_exact_indices). From the
// spec alone, so the CLI refuses these before it estimates the run's memory.
void require_cpu_workload(const WorkloadSpec& spec);

// Throws UsageError for parameters or shapes the run cannot take.
RunOutput run_cpu(const WorkloadSpec& spec, const RunOptions& options);

// A perturbation of the reference's starting point: every parameter and every floating-point
// input value x becomes x (1 + relative xi), xi uniform in [-1, 1) drawn from (seed, tensor,
// element); token ids and targets are left alone. With `relative` the unit roundoff of a working
// precision, the perturbed step shows how far rounding alone moves the reference: the tests'
// measure of what a correct low-precision run may differ by (tests/common/reference_spread.h).
struct ReferencePerturbation {
  double relative = 0;  // 0: none
  std::uint64_t seed = 0;
};

// The same step on one device in float64: every micro-batch forward through all
// layers, then backward (I then W) in reverse, gradients accumulated. Keeps every
// gradient tensor (it is the reference the others are compared with). With `steps` > 1, the
// optimizer updates the parameters after each step but the last, whose loss and gradients are
// returned. (cpu::single_device_step_in<double>, harness/backends/cpu/reference_step.h.)
StepValues single_device_step(const WorkloadSpec& spec, int microbatches, std::uint64_t seed,
                              int steps = 1, const OptimizerOptions& optimizer = {},
                              const ReferencePerturbation& perturbation = {});

// How far a correct step in the run's precision lands from the float64 single-device step
// (`reference`, as single_device_step gives it): kPerturbedReferenceRuns steps computed in the
// run's own precision where the CPU has it (f32, f64; float64 for bf16), from starts perturbed by
// unit_roundoff(spec.dtype), against it (measure_reference_spread, reference_step.h). What
// check_json allows for.
ReferenceSpread reference_spread(const WorkloadSpec& spec, int microbatches, std::uint64_t seed,
                                 int steps, const OptimizerOptions& optimizer,
                                 const StepValues& reference);

// The same, for a backend whose reference is a step of its own (the CUDA backend's one-device
// GPU step, which shares the run's kernels and so cannot show how far rounding moves it): the
// step and its perturbed copies on the CPU in spread_precision (f32 for an f32 run, else
// float64), one micro-batch at a time. Nothing, with `why` saying so, where they would need more
// than `budget_bytes` or the CPU kernels cannot run the spec in that precision.
std::optional<ReferenceSpread> cpu_reference_spread(const WorkloadSpec& spec, int microbatches,
                                                    std::uint64_t seed, int steps,
                                                    const OptimizerOptions& optimizer,
                                                    double budget_bytes, std::string* why);

// run --check on the CPU backends (threads and processes): `got`, the last of o.warmup + o.steps
// steps over `microbatches` micro-batches, against the same steps on one device in the run's
// precision (f32 or float64: the same kernels, so a schedule may differ only in the order it sums
// the micro-batches' gradients), named "the CPU f32 single-device step" + `over`. Where it misses
// the dtype's default tolerance (not one the user gave), the single-device step is computed again
// in the run's precision from starts perturbed by one rounding of the run's dtype, and the check
// allows for how far those land from the reference (check_json's spread): a model whose own steps
// move by more than the tolerance under one rounding, such as AmoebaNet with BatchNorm over 2 or 4
// values per channel after a few optimizer steps, or whose gradients cancel below f32's rounding,
// such as AmoebaNet in f32 with one image per micro-batch (reference_step.h), cannot be held
// tighter by any correct run.
// `first`, where given (a run of more than one step), is the first step's values: where the last
// step cannot be judged, they are held to the reference's first step (`first_step` in the
// record), which one rounding has not had steps to amplify, and decide `passed`.
nlohmann::json cpu_check(const WorkloadSpec& spec, const RunOptions& o, int microbatches,
                         const StepValues& got, const std::string& over,
                         const StepValues* first = nullptr);

}  // namespace ppbench
