// The hinge of ppbench (docs/architecture.md): per-rank timed events that the simulator and every
// real backend produce alike, so metrics, plots and exports are written once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/action.h"

namespace ppbench {

struct ComputeEvent {
  std::int32_t rank;
  double start, end;
  Action action;
  // The CPU time the rank's thread spent on the action, where rank threads shared fewer cores
  // than there were ranks (Trace::shared_cores); -1 elsewhere.
  double cpu = -1;
  // The rank's own time handing this action's outputs to other ranks right after it: the spans
  // of `sends` send calls (LogP's sender overhead o). Across TCP the kernel moves an eager
  // message's bytes inside its send call, on the sender's core, so the rank is not free again
  // until the call returns. Only calls that found room in their channel count: one that waited
  // for the receiver to take a message measures that receiver, not the send.
  double send = 0;
  std::int32_t sends = 0;
};

// A tensor crossing ranks: the output of `task` (activation after F,
// gradient after B or I) from the producer's rank to the consumer's. A measured one runs from
// when both sides were ready (the later of the send and the posted receive) to when the tensor
// was in the consumer's hand.
struct CommEvent {
  std::int32_t src_rank, dst_rank;
  double start, end;
  Task task;
  // Measured: the tensor had been sent before its receive was posted, so the whole span is the
  // consumer's own work of taking it in (a rendezvous copy, a mailbox take), none of it waiting.
  bool queued = false;
};

// A data-parallel gradient all-reduce (`run --dp R`, `simulate --dp R`): the gradients of
// `stage` (-1: every stage the rank holds, reduced at the end of the step) summed across the R
// replicas that hold it. Its time counts toward the step's makespan but not toward busy time.
struct CollectiveEvent {
  std::int32_t rank;
  double start, end;
  std::int32_t stage;
  double bytes;
};

// An optimizer step on a rank (`run --optimizer`): the parameters of `stage` updated from its
// gradients. Busy time, like a compute action.
struct UpdateEvent {
  std::int32_t rank;
  double start, end;
  std::int32_t stage;
  double cpu = -1;  // as ComputeEvent::cpu
};

struct MemorySample {
  std::int32_t rank;
  double time;
  double live_bytes;
};

struct Trace {
  std::string source = "simulator";  // "simulator", "cpu", "cuda"
  std::string time_unit = "unit";    // "unit" (cost-model units) or "s"
  int ranks = 0;
  std::vector<ComputeEvent> compute;  // each rank's events in execution order
  std::vector<CommEvent> comm;
  std::vector<CollectiveEvent> collectives;
  std::vector<UpdateEvent> updates;
  std::vector<MemorySample> memory;
  // Where a CPU run's rank threads outnumbered the cores they could run on: those cores, and per
  // rank the CPU time its thread spent in the step (its actions, its optimizer steps, and the
  // executor's own work between them). 0 and empty where every rank had a core (or a GPU).
  int shared_cores = 0;
  std::vector<double> rank_cpu;
  // Where a CPU run pinned each rank's thread to a core of its own (ExecutorOptions::pin_ranks):
  // that CPU per rank, -1 where the system refused. Empty where the OS placed the threads.
  std::vector<int> pinned_cpus;
};

}  // namespace ppbench
