// Contiguous layers -> pipeline stages.
//
//   balanced  (default) minimises the largest stage cost, cost = F + I + W FLOPs of its layers
//             (exact: the least limit within which greedy runs fit the stages, found by
//             bisecting the doubles; O(64 layers) time, O(layers) memory).
//   uniform   equal layer counts; the L mod S leftover layers go one each to the first stages
//             (numpy.array_split's convention), so the first stage, which in a transformer also
//             holds the embedding, is never lighter than the rest by more than one layer.
//   "4,4,3,5" explicit layer counts: exactly S entries, each >= 1, summing to the layer count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/layer_spec.h"

namespace ppbench {

struct StageSpec {
  int first_layer = 0;
  int num_layers = 0;
  int64_t params = 0;
  Flops flops;
  ActivationBytes activation;      // summed over the stage's layers, per micro-batch
  int64_t boundary_bytes_out = 0;  // what the stage sends to the next (0 for the last)
};

struct PartitionPlan {
  std::string method;  // "balanced", "uniform" or "explicit"
  std::vector<int> layer_counts;
  std::vector<StageSpec> stages;
  double max_stage_cost() const;  // largest F + I + W over stages
};

// Layer counts minimising the largest stage sum of `cost` (non-negative; each stage >= 1 layer).
// Among optimal partitions it gives later stages as many layers as the optimum allows: under
// 1F1B-like schedules early stages hold more micro-batches in flight, so they are kept lighter.
// Time and memory grow with the layers, not with layers x stages.
std::vector<int> balanced_partition(const std::vector<double>& cost, int stages);
std::vector<int> uniform_partition(int layers, int stages);
// Parses "4,4,3,5"; UsageError naming the bad entry, count or sum.
std::vector<int> explicit_partition(std::string_view list, int layers, int stages);

// UsageError when a workload of `layers` layers cannot give each of `stages` stages one; said by
// partition() and, before a schedule is built, by the commands that know the stage count early.
void require_layers_for_stages(const std::string& workload, std::int64_t layers, int stages);

// `method` is "balanced", "uniform" or a comma-separated list. UsageError when the workload has
// fewer layers than stages, or for an unknown method.
PartitionPlan partition(const WorkloadSpec& spec, int stages, std::string_view method);

// Before a search over stage counts (tune): UsageError for an unknown method, or a list of layer
// counts that does not sum to the workload's `layers` (a list then fits only candidates of its
// own stage count).
void check_partition_method(std::string_view method, int layers);

// Stages implied by an explicit list (its entry count), 0 for "balanced"/"uniform".
int stages_in_list(std::string_view method);

}  // namespace ppbench
