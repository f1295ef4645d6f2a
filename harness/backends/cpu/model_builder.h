// Turns a workload spec (workloads/) into the CPU kernels (workloads/cpu/)
// layer by layer, and makes each micro-batch's synthetic data.
//
// Parameters depend only on (seed, layer index), so the copies of a stage
// that two-direction schedules hold start identical, and a pipelined run and
// the single-device reference build the same model.
#pragma once

#include <cstdint>

#include "workloads/cpu/pipeline_layer.h"
#include "workloads/layer_spec.h"

namespace ppbench::cpu {

// The CPU kernels keep token ids and class targets as values of T (workloads/cpu/tensor.h,
// Saved): a float holds every integer only up to 2^24, so a larger --vocab or --classes would
// train on rounded ids, silently. The most classes (or vocabulary entries) T keeps exact: 2^24 + 1
// for float, and for double the int32 the targets are drawn as, 2^31.
template <typename T>
std::int64_t largest_index_count();
// UsageError naming --vocab or --classes, its value, the dtype and largest_index_count<T>()
// when the spec's vocabulary or classes exceed it. make_pipeline_layer and make_microbatch call
// it first, so that every CPU run refuses before it allocates.
template <typename T>
void require_exact_indices(const WorkloadSpec& spec);

template <typename T>
PipelineLayerPtr<T> make_pipeline_layer(const WorkloadSpec& spec, std::size_t index,
                                        std::uint64_t seed);

// Inputs and targets of one micro-batch (its global index across chains):
// uniform features or images, token ids and class or next-token targets,
// all drawn from (seed, index) so every run sees the same data.
template <typename T>
struct MicroBatch {
  Tensors<T> inputs;
  std::vector<std::int32_t> targets;
};

template <typename T>
MicroBatch<T> make_microbatch(const WorkloadSpec& spec, std::uint64_t seed, int index);

}  // namespace ppbench::cpu
