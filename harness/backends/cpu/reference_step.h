// The single-device step that `run --check` and the tests compare a pipelined step with, in either
// precision the CPU kernels have (a CPU run is held to the one in its own precision: the same
// kernels, so a schedule may change only the order the micro-batches' gradients are summed in),
// and how far a correct step in the run's own precision lands from the reference: what the check
// allows for where the plain comparison misses.
//
// Why the run's precision, in the reference and in the spread, and not float64 perturbed: a float64
// step started one rounding of f32 away shows how far rounding the *start* moves the step, not what
// rounding every intermediate does. Where a gradient is a difference of nearly equal terms the two
// differ by orders of magnitude. BatchNorm is the case: its input gradient is gamma rstd / M (M dy
// - sum dy - xhat sum(dy xhat)), exactly zero for a dy constant per channel, so every path that is
// normalised again carries only the rounding of those M-term sums. AmoebaNet with one image per
// micro-batch is the extreme: the classifier's global average pool of a BatchNorm output over one
// image is that BatchNorm's own mean, 0, so every gradient below the last cell's BatchNorms is
// exactly zero and float64 computes it as 1e-14 of noise, float32 as 1e-5 (the same noise, 2^29
// times larger). Measured (AmoebaNet-D(3, 8), 64 pixels, micro-batch 1, seed 1234): the f32 step
// is 1.8e-3 from the f64 one (stem weight, against the floor of kGradientScaleFloor); the f64 step
// perturbed by 2^-24 moves by 5.8e-8, so the old check held it to 1e-4 and failed every correct f32
// run; two f32 steps perturbed by 2^-24 land 1.9e-3 from the f64 step, and 4 x that passes it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "harness/backends/cpu/cpu_run.h"
#include "harness/backends/cpu/model_builder.h"
#include "harness/backends/cpu/part_optimizer.h"
#include "harness/backends/step_values.h"
#include "workloads/counter_rng.h"
#include "workloads/layer_spec.h"

namespace ppbench {

namespace cpu {

// Multiplies every value by (1 + relative xi) (ReferencePerturbation), rounded once to T.
template <typename T, class Values>
void perturb_in_place(Values& values, const ReferencePerturbation& p, std::uint64_t stream) {
  if constexpr (std::is_same_v<T, double>) {
    perturb_values(values, values.data(), p.relative, p.seed, stream);
  } else {
    std::vector<double> moved(values.size());
    perturb_values(values, moved.data(), p.relative, p.seed, stream);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(moved[i]);
  }
}

// single_device_step (cpu_run.h) in precision T: every micro-batch forward through all layers,
// then backward (I then W) in reverse, gradients accumulated in T; with `steps` > 1 the optimizer
// updates the parameters after each step but the last. The gradients are kept (in double).
template <typename T>
StepValues single_device_step_in(const WorkloadSpec& spec, int microbatches, std::uint64_t seed,
                                 int steps = 1, const OptimizerOptions& optimizer = {},
                                 const ReferencePerturbation& perturbation = {}) {
  std::vector<PipelineLayerPtr<T>> layers;
  for (std::size_t l = 0; l < spec.layers.size(); ++l)
    layers.push_back(make_pipeline_layer<T>(spec, l, seed));
  std::vector<Param<T>*> all_params;
  for (auto& layer : layers)
    for (Param<T>* p : layer->params()) all_params.push_back(p);
  // The perturbation's streams: 0, 1, ... the parameters in model order, 2^32 + m the inputs of
  // micro-batch m.
  const bool perturbed = perturbation.relative != 0;
  if (perturbed)
    for (std::size_t k = 0; k < all_params.size(); ++k)
      perturb_in_place<T>(all_params[k]->value.data, perturbation, k);
  std::optional<PartOptimizer<T>> opt;
  if (optimizer.enabled()) opt.emplace(optimizer, std::vector<std::vector<Param<T>*>>{all_params});
  StepValues out;
  for (int step = 0; step < steps; ++step) {
    if (step > 0) {
      if (opt) opt->step();
      for (Param<T>* p : all_params) std::fill(p->grad.data.begin(), p->grad.data.end(), T(0));
    }
    out.loss = 0;
    for (int m = 0; m < microbatches; ++m) {
      MicroBatch<T> d = make_microbatch<T>(spec, seed, m);
      if (perturbed && spec.workload != "transformer")  // a transformer reads token ids
        for (Tensor<T>& x : d.inputs)
          perturb_in_place<T>(x.data, perturbation,
                              (std::uint64_t{1} << 32) + static_cast<std::uint64_t>(m));
      const MicroBatchData<T> md{&d.inputs, &d.targets, T(1) / static_cast<T>(microbatches)};
      std::vector<Saved<T>> saved(layers.size());
      Tensors<T> x;
      for (std::size_t l = 0; l < layers.size(); ++l)
        x = layers[l]->forward(std::move(x), saved[l], md);
      out.loss += static_cast<double>(x.front().data.front()) / microbatches;
      for (std::size_t l = layers.size(); l-- > 0;) {
        x = layers[l]->backward_input(std::move(x), saved[l], md);
        layers[l]->backward_weight(saved[l]);
      }
    }
  }
  // One part holding every layer: the reference has no stages.
  StageParams<Param<T>> all;
  for (std::size_t l = 0; l < layers.size(); ++l)
    all.layers.emplace_back(static_cast<int>(l), layers[l]->params());
  const std::vector<std::vector<StageParams<Param<T>>>> one_rank = {{all}};
  summarize_gradients_on_host(
      spec, one_rank, 1, true, out,
      [](const StageParams<Param<T>>&, const Param<T>* p, std::vector<double>& sum) {
        sum.assign(p->grad.data.begin(), p->grad.data.end());
      });
  return out;
}

}  // namespace cpu

// The precision a step of `dtype` runs in on the CPU when the spread is measured: the dtype's own
// where the CPU kernels have it (f64, f32), else float64 (bf16, a CUDA run's: the CPU has no bf16
// kernels, so there only the rounding of the start is modelled).
inline DType spread_precision(DType dtype) {
  return dtype == DType::kF32 ? DType::kF32 : DType::kF64;
}

// The step in spread_precision(spec.dtype), from a perturbed start.
inline StepValues working_precision_step(const WorkloadSpec& spec, int microbatches,
                                         std::uint64_t seed, int steps,
                                         const OptimizerOptions& optimizer,
                                         const ReferencePerturbation& perturbation) {
  if (spread_precision(spec.dtype) == DType::kF32)
    return cpu::single_device_step_in<float>(spec, microbatches, seed, steps, optimizer,
                                             perturbation);
  return cpu::single_device_step_in<double>(spec, microbatches, seed, steps, optimizer,
                                            perturbation);
}

// How far a correct step in the run's precision lands from `reference` (the step the run is
// compared with: on the CPU backends the single-device step in the run's precision, for a CUDA
// run the float64 one): kPerturbedReferenceRuns steps in spread_precision(spec.dtype),
// each from a start perturbed by unit_roundoff(spec.dtype) (so that their roundings are
// independent of one another and of the run's), compared with `reference` as the run is. Each
// such step is itself a correct computation of the run's step in the run's precision, so a run
// cannot be held closer than they land; check_json allows kReferenceSpreadFactor times that.
inline ReferenceSpread measure_reference_spread(const WorkloadSpec& spec, int microbatches,
                                                std::uint64_t seed, int steps,
                                                const OptimizerOptions& optimizer,
                                                const StepValues& reference) {
  ReferenceSpread spread{.relative = unit_roundoff(spec.dtype),
                         .precision = std::string(dtype_name(spread_precision(spec.dtype)))};
  auto widen = [&spread](const GradientComparison& m) {
    // A perturbed step that broke (NaN) says nothing about rounding: it must not widen the
    // tolerance.
    if (std::isfinite(m.max_rel_error))
      spread.gradients = std::max(spread.gradients, m.max_rel_error);
  };
  std::vector<StepValues> moved;
  for (int k = 0; k < kPerturbedReferenceRuns; ++k) {
    moved.push_back(
        working_precision_step(spec, microbatches, seed, steps, optimizer,
                               {spread.relative, seed + 1 + static_cast<std::uint64_t>(k)}));
    widen(compare_gradients(moved.back().tensors, reference.tensors));
    const double loss =
        std::abs(moved.back().loss - reference.loss) / std::max(std::abs(reference.loss), 1e-300);
    if (std::isfinite(loss)) spread.loss = std::max(spread.loss, loss);
  }
  return spread;
}

}  // namespace ppbench
