// Data parallelism on paper: the time of a gradient all-reduce across R replicas of a pipeline,
// and where `simulate --dp R` puts those all-reduces on a simulated step (docs/metrics.md,
// "Data parallelism").
//
// A ring all-reduce of `bytes` among R processes is a reduce-scatter then an all-gather, each
// R - 1 steps in which every process sends one 1/R slice of the buffer to its ring neighbour
// (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
// JPDC 2009; the algorithm NCCL's ring uses). With a link of `bandwidth` and a per-step
// `latency`:
//   T(bytes, R) = 2 (R - 1) latency + 2 (R - 1) / R * bytes / bandwidth,   T = 0 for R = 1.
#pragma once

#include <vector>

#include "harness/trace.h"
#include "schedules/schedule.h"

namespace ppbench {

struct RingLink {
  double bandwidth = 1;  // bytes (or the model's volume units) per time unit
  double latency = 0;    // time units per ring step
};

double ring_allreduce_time(double bytes, int replicas, const RingLink& link);

struct DataParallel {
  int replicas = 1;
  // false: each rank reduces the gradients of all its stages in one all-reduce after its last
  // action; true: each stage's all-reduce starts once that stage's last backward (B, or W when
  // the backward is split) has ended, and a rank's all-reduces run one at a time, in the order
  // their stages finish (ties: the lower stage first).
  bool overlap = false;
  RingLink link;
  std::vector<double> stage_bytes;  // gradient bytes of each schedule stage, one replica
};

// Adds to a simulated step (one replica's trace) the all-reduces every replica runs. Replicas
// are identical in the simulator, so rank r of every replica starts its all-reduces at the same
// time and the one replica's trace stands for all R. Nothing is added for R = 1. The compute
// events are left as they are: the all-reduce is post-processing of the walk's result (the next
// step's forward is not modelled, so overlapping it with the all-reduce does not arise). The
// optimizer's updates, where the trace has them, move after the all-reduces whose sums they
// read: each rank's after its last action, one at a time, each once its stage's gradients are
// summed (the compute events keep the times the walk gave them with the updates among them).
void add_allreduces(Trace& trace, const Schedule& s, const DataParallel& dp);

}  // namespace ppbench
