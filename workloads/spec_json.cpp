#include "workloads/spec_json.h"

#include <string>

namespace ppbench {

namespace {

nlohmann::json flops_json(const Flops& f) {
  return {{"F", f.f}, {"I", f.i}, {"W", f.w}, {"total", f.total()}};
}

nlohmann::json activation_json(const ActivationBytes& a) { return {{"B", a.b}, {"W", a.w}}; }

}  // namespace

nlohmann::json to_json(const TensorSpec& t) {
  return {{"name", t.name}, {"shape", t.shape}, {"bytes", t.bytes}};
}

nlohmann::json to_json(const LayerSpec& l) {
  nlohmann::json boundary = nlohmann::json::array();
  for (const auto& t : l.boundary_out) boundary.push_back(to_json(t));
  nlohmann::json attrs = nlohmann::json::object();
  for (const auto& [k, v] : l.attrs) attrs[k] = v;
  return {{"name", l.name},
          {"kind", std::string(layer_kind_name(l.kind))},
          {"params", l.params},
          {"flops", flops_json(l.flops)},
          {"activation_bytes", activation_json(l.activation)},
          {"paper_activation_bytes", activation_json(l.paper_activation)},
          {"boundary_bytes", l.boundary_bytes()},
          {"boundary", boundary},
          {"attrs", attrs}};
}

nlohmann::json to_json(const WorkloadSpec& spec) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : spec.layers) layers.push_back(to_json(l));
  nlohmann::json labels = nlohmann::json::array();
  for (const auto& t : spec.labels) labels.push_back(to_json(t));
  return {{"workload", spec.workload},
          {"config", spec.config},
          {"microbatch_size", spec.microbatch_size},
          {"dtype", std::string(dtype_name(spec.dtype))},
          {"dtype_bytes", dtype_bytes(spec.dtype)},
          {"params", spec.params()},
          {"num_layers", spec.layers.size()},
          {"flops", flops_json(spec.flops())},
          {"activation_bytes", activation_json(spec.activation())},
          {"paper_activation_bytes", activation_json(spec.paper_activation())},
          {"input", to_json(spec.input)},
          {"labels", labels},
          {"layers", layers}};
}

nlohmann::json to_json(const PartitionPlan& plan, const WorkloadSpec& spec) {
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const StageSpec& st = plan.stages[s];
    nlohmann::json names = nlohmann::json::array();
    ActivationBytes paper;  // summed here: the partitioner and the cost model need only ppbench's
    for (int i = st.first_layer; i < st.first_layer + st.num_layers; ++i) {
      names.push_back(spec.layers[i].name);
      paper += spec.layers[i].paper_activation;
    }
    stages.push_back({{"stage", s},
                      {"first_layer", st.first_layer},
                      {"num_layers", st.num_layers},
                      {"layers", names},
                      {"params", st.params},
                      {"flops", flops_json(st.flops)},
                      {"activation_bytes", activation_json(st.activation)},
                      {"paper_activation_bytes", activation_json(paper)},
                      {"boundary_bytes", st.boundary_bytes_out}});
  }
  return {{"method", plan.method},
          {"layer_counts", plan.layer_counts},
          {"max_stage_flops", plan.max_stage_cost()},
          {"stages", stages}};
}

}  // namespace ppbench
