// The memory model of ppbench's CUDA layers (harness/cuda_step_memory.h), host code that the
// plain CLI runs too: the fused attention's log-sum-exp in place of the probabilities, and fp32
// gradients whatever the parameters' dtype (what the GPU records measured on the H100: a bf16
// transformer's gradients took twice its parameters' bytes).
#include <cstdint>

#include <gtest/gtest.h>

#include "harness/backends/run_record.h"
#include "harness/cuda_step_memory.h"
#include "schedules/registry.h"
#include "tests/common/pipeline_workloads.h"
#include "workloads/mlp.h"
#include "workloads/partition.h"

namespace ppbench {
namespace {

// 6 decoder layers (4 heads, 2 kv heads), micro-batch 2, seq 5.
WorkloadSpec tiny_transformer(DType dtype) {
  return small_pipeline_transformer("tiny-llama", dtype);
}

TEST(CudaStepMemory, TheFusedAttentionKeepsTheLogSumExpInsteadOfTheProbabilities) {
  // 6 decoder layers, micro-batch 2, seq 5, 4 heads, bf16: each layer's probabilities are
  // 4 * 5 * 5 * 2 elements of 2 bytes; the fused attention keeps 4 * 5 * 2 floats instead.
  const WorkloadSpec spec = tiny_transformer(DType::kBF16);
  const PartitionPlan plan = partition(spec, 2, "balanced");
  const PartitionPlan cuda = cuda_activation_plan(spec, plan);
  ASSERT_EQ(cuda.stages.size(), plan.stages.size());
  std::int64_t layers = 0;
  for (std::size_t k = 0; k < plan.stages.size(); ++k) {
    std::int64_t here = 0;
    for (int l = plan.stages[k].first_layer;
         l < plan.stages[k].first_layer + plan.stages[k].num_layers; ++l)
      here += spec.layers[static_cast<std::size_t>(l)].kind == LayerKind::kLlamaLayer;
    layers += here;
    EXPECT_EQ(cuda.stages[k].activation.b,
              plan.stages[k].activation.b - here * (4 * 5 * 5 * 2 * 2 - 4 * 5 * 2 * 4))
        << "stage " << k;
    EXPECT_EQ(cuda.stages[k].activation.w, plan.stages[k].activation.w) << "stage " << k;
  }
  EXPECT_EQ(layers, 6);
  // Other workloads keep what the CPU kernels keep.
  const WorkloadSpec mlp = build_mlp({.layers = 4, .width = 8}, 2, DType::kF32);
  const PartitionPlan mp = partition(mlp, 2, "balanced");
  EXPECT_EQ(cuda_activation_plan(mlp, mp).stages[0].activation.b, mp.stages[0].activation.b);
}

TEST(CudaStepMemory, GradientsAreFp32WhateverTheParametersDtype) {
  EXPECT_EQ(parameter_bytes(DType::kBF16, Optimizer::kAdamW, true).grad, 4);
  EXPECT_EQ(parameter_bytes(DType::kF32, Optimizer::kAdamW, true).grad, 4);
  EXPECT_EQ(parameter_bytes(DType::kF64, Optimizer::kNone, true).grad, 8);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const WorkloadSpec spec = tiny_transformer(dt);
    const Schedule s = generate({"1f1b", 2, 4, 0, 0});
    const PartitionPlan plan = partition(spec, 2, "balanced");
    const StepMemoryOptions o{Optimizer::kAdamW, false, 0};
    const StepMemory cpu = step_memory(spec, s, plan, o);
    const StepMemory gpu = cuda_step_memory(spec, s, plan, o);
    ASSERT_EQ(gpu.ranks.size(), 2u);
    EXPECT_STREQ(gpu.model, "ppbench memory --backend cuda");  // what a GPU record's note names
    EXPECT_STREQ(cpu.model, "ppbench memory");
    for (std::size_t r = 0; r < gpu.ranks.size(); ++r) {
      const RankMemory& g = gpu.ranks[r];
      EXPECT_EQ(g.param_count, cpu.ranks[r].param_count);
      EXPECT_EQ(g.params, cpu.ranks[r].params);
      EXPECT_EQ(g.grads, 4 * g.param_count) << dtype_name(dt) << " rank " << r;
      EXPECT_EQ(g.optimizer, cpu.ranks[r].optimizer);  // m, v and (bf16) the master copy
      EXPECT_EQ(g.comm, cpu.ranks[r].comm);
      // The schedule's peak of the CUDA layers' activations, below the CPU kernels'.
      EXPECT_EQ(g.activations, static_cast<std::int64_t>(predicted_peak_bytes(
                                   s, cuda_activation_plan(spec, plan), false)[r]));
      EXPECT_LT(g.activations, cpu.ranks[r].activations);
    }
  }
}

}  // namespace
}  // namespace ppbench
