// The memory of a step of ppbench's CUDA layers (`run --backend cuda` records it beside what it
// measures; `ppbench memory --backend cuda`), where it differs from what step_memory.h models
// for the CPU kernels:
//   - attention: the fused attention keeps one f32 log-sum-exp per row and head where the CPU
//     kernels keep the [heads, seq, seq] probabilities in the layer dtype;
//   - gradients: every parameter's gradient is an f32 tensor that the weight-gradient GEMMs
//     accumulate into (workloads/cuda/layer.cpp, make_param), so a bf16 parameter's is 4 bytes.
// Everything else the CUDA layers keep mirrors the CPU layers (workloads/cuda/layer.h). Host
// code only: the plain CLI, built without CUDA, models it too.
#pragma once

#include "harness/step_memory.h"

namespace ppbench {

// `plan` with each decoder layer's activation bytes as the CUDA layers keep them.
PartitionPlan cuda_activation_plan(const WorkloadSpec& spec, const PartitionPlan& plan);

// step_memory() of the CUDA layers: their activations and fp32 gradients.
StepMemory cuda_step_memory(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
                            StepMemoryOptions o);

}  // namespace ppbench
