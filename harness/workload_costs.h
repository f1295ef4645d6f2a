// Per-stage costs of a workload cut into a schedule's stages (docs/metrics.md, "Costs from a
// workload"): what `simulate --workload` feeds the simulator instead of uniform --cost.
//
// With a rates profile, each layer's pass takes the roofline time
//   t = max(FLOPs / peak_flops, bytes / memory_bandwidth)
// with the pass's FLOPs from the spec and its bytes moved as layer_bytes() counts them; a stage
// sums its layers, B = I + W, FB = F + B, and the hand-over after a stage takes
//   comm = boundary bytes / link_bandwidth + link_latency.
// With a measured profile the stage times are the profile's own.
#pragma once

#include <vector>

#include "harness/cost_model.h"
#include "harness/device_profile.h"
#include "schedules/placement.h"
#include "workloads/layer_spec.h"
#include "workloads/partition.h"

namespace ppbench {

// Bytes a layer's F, I and W read and write in memory, per micro-batch (w: weights = params x
// dtype bytes; in: the layer's input, the previous layer's boundary or the data; out: its
// boundary; M_B, M_W its kept activations):
//   F = w + in + out + M_B        reads weights and input, writes output and what it keeps
//   I = w + out + M_B + in        reads weights, the output's gradient and M_B, writes the
//                                 input's gradient (none for the first layer: its input is data)
//   W = M_W + 2 w                 reads what it kept, accumulates into the weight gradient
struct PassBytes {
  double f = 0, i = 0, w = 0;
};
PassBytes layer_bytes(const WorkloadSpec& spec, std::size_t layer);

// max(flops / peak_flops, bytes / memory_bandwidth).
double roofline_time(double flops, double bytes, const DeviceRates& r);

// One StageCost per partition stage (seconds); comm is the hand-over to the next stage (0 for
// the last). A measured profile must have as many stages as the plan.
std::vector<StageCost> stage_costs(const WorkloadSpec& spec, const PartitionPlan& plan,
                                   const DeviceProfile& profile);

// Marks the hand-overs of more than `eager_limit` bytes (a boundary's tensor, the same size down
// and up) as going by rendezvous, each control message taking `handshake` seconds
// (StageCost::rendezvous), as an MPI library sends messages past its eager limit.
void go_by_rendezvous(std::vector<StageCost>& parts, const PartitionPlan& plan, double eager_limit,
                      double handshake);

// The simulator's model: every schedule stage costs what its position in its chain does.
CostModel schedule_cost_model(const Placement& placement, const std::vector<StageCost>& parts);

// The partition stage with the largest F + B (the lowest index among equals): under any
// schedule every micro-batch passes it, so no step is shorter than N x its F + B.
int bounding_stage(const std::vector<StageCost>& parts);

}  // namespace ppbench
