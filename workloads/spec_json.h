// JSON form of a workload spec and of a partition, as `ppbench model --format json` prints them
// and as results records embed them.
#pragma once

#include <nlohmann/json.hpp>

#include "workloads/layer_spec.h"
#include "workloads/partition.h"

namespace ppbench {

nlohmann::json to_json(const TensorSpec& t);
nlohmann::json to_json(const LayerSpec& l);
// {workload, config, microbatch_size, dtype, dtype_bytes, params, flops, activation_bytes,
//  input, labels, layers: [...]}
nlohmann::json to_json(const WorkloadSpec& spec);
// {method, layer_counts, max_stage_flops, stages: [{stage, first_layer, num_layers, layers,
//  params, flops, activation_bytes, boundary_bytes}]}
nlohmann::json to_json(const PartitionPlan& plan, const WorkloadSpec& spec);

}  // namespace ppbench
