// Replays a measured step through the simulator: per-stage costs are the
// mean measured durations of each op on that stage, the comm delay the mean
// measured hand-over latency, the receive cost what a consumer spent taking in a tensor
// that was already there and the send cost what a producer spent in a send call. The gap between
// the measured and the replayed bubble is the simulator's fidelity, reported with every run. The
// optimizer steps are replayed where they ran, with their measured durations.
#pragma once

#include "harness/allreduce_cost.h"
#include "harness/cost_model.h"
#include "harness/simulator.h"
#include "harness/trace.h"
#include "schedules/placement.h"
#include "schedules/schedule.h"

namespace ppbench {

// A measured step's cross-rank hand-overs as the replay charges them (StageCost::comm, ::recv,
// ::send): `receive` is the mean span of the receives that found their tensor already sent (the
// consumer's own work: a rendezvous copy, a mailbox take); `delay` is the mean span of the
// receives that waited, less that work (the latency). With every receive waiting, `receive` is 0
// and `delay` the plain mean, as before receives were told apart. `send` is the mean span of the
// send calls that found room in their channel (ComputeEvent::send): the producer's own work.
struct HandOver {
  double delay = 0;    // seconds
  double receive = 0;  // seconds
  double send = 0;     // seconds
};
HandOver hand_over_from_trace(const Trace& trace);

// Ops a stage never ran (e.g. W in a schedule without splits) get costs
// derived from the ones it did (B = I + W, FB = F + B, ...).
CostModel costs_from_trace(const Trace& trace, const Placement& placement);

// The measured step's optimizer steps (trace.updates) as the simulator replays them: each after
// the action its rank had last finished when the step began (the stage's last backward on the
// threads and GPUs, the rank's last action where updates ran at the end of the step).
std::vector<OptimizerStep> optimizer_steps_from_trace(const Trace& trace,
                                                      const Placement& placement);

// Optimizer steps where both executors run them, for a simulation: each stage's update right
// after its last backward (B, I or W) on its rank, `seconds[part]` long (a measured device
// profile's per-stage times, by partition stage); a part of 0 s adds none.
std::vector<OptimizerStep> optimizer_steps_after_backwards(const Schedule& s,
                                                           const std::vector<double>& seconds);

// Where the optimizer steps ran after the step's all-reduces (processes with data parallelism):
// appends them to a replayed trace, one after another on each rank, from the later of its last
// action's end and its last all-reduce's end (call after add_allreduces).
void add_updates_after_allreduces(Trace& trace, const std::vector<OptimizerStep>& steps);

// The data parallelism of a measured step with `replicas` replicas, for add_allreduces: each
// stage's gradient bytes as its all-reduces carried them (end of step: a rank's bytes on its
// first stage, all that matters there), and the ring link that makes the ring formula's total
// time equal the measured total (latency 0: one step size cannot tell latency from bandwidth).
DataParallel data_parallel_from_trace(const Trace& trace, const Schedule& s, int replicas,
                                      bool overlap);

}  // namespace ppbench
