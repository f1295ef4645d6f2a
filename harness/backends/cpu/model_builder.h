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
