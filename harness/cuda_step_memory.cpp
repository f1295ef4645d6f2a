#include "harness/cuda_step_memory.h"

namespace ppbench {

PartitionPlan cuda_activation_plan(const WorkloadSpec& spec, const PartitionPlan& plan) {
  PartitionPlan out = plan;
  if (spec.workload != "transformer") return out;
  const std::int64_t e = dtype_bytes(spec.dtype);
  const std::int64_t b = spec.microbatch_size, seq = spec.input.shape.at(1);
  for (StageSpec& st : out.stages)
    for (int l = st.first_layer; l < st.first_layer + st.num_layers; ++l) {
      const LayerSpec& ls = spec.layers[static_cast<std::size_t>(l)];
      if (ls.kind != LayerKind::kLlamaLayer && ls.kind != LayerKind::kGptLayer) continue;
      const std::int64_t heads = ls.attr("heads");
      st.activation.b += heads * seq * b * 4 - heads * seq * seq * b * e;
    }
  return out;
}

StepMemory cuda_step_memory(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
                            StepMemoryOptions o) {
  o.fp32_gradients = true;
  StepMemory m = step_memory(spec, s, cuda_activation_plan(spec, plan), o);
  m.model = "ppbench memory --backend cuda";
  return m;
}

}  // namespace ppbench
