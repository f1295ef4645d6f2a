// Puts every rank's CUDA-event timings on one time base, producing the common Trace.
//
// cudaEventElapsedTime only measures between events of one device, so each rank records a start
// event and reports every action as milliseconds after it. To compare ranks, each rank also reads
// the host clock (one steady clock shared by the rank threads) when its start event completes;
// event times are then host_start + elapsed, shifted so the earliest start is zero. The skew
// between ranks' start events is thus the host clock's, not an assumption that they coincide.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/trace.h"

namespace ppbench {

struct RankStart {
  std::int32_t rank;
  double host_seconds;  // host clock (seconds, any epoch) when the rank's start event completed
};

struct GpuComputeTiming {
  std::int32_t rank;
  float start_ms, end_ms;  // cudaEventElapsedTime from the rank's start event
  Action action;
};

// A transfer, timed on the clock of `timed_on` (the rank whose stream recorded its events:
// the sender's communication stream for NCCL, the copying partition for virtual devices).
struct GpuCommTiming {
  std::int32_t src_rank, dst_rank, timed_on;
  float start_ms, end_ms;
  Task task;
};

// An optimizer step of `stage` on `rank` (trace.h UpdateEvent), timed on the rank's compute stream.
struct GpuUpdateTiming {
  std::int32_t rank;
  float start_ms, end_ms;
  std::int32_t stage;
};

// Throws std::invalid_argument when a rank has no start (or two), an event names an unknown rank,
// or a timing is negative, not finite or ends before it starts: each is an executor bug.
// Compute events keep their order within a rank and are grouped by rank, as are updates; source
// is "cuda".
Trace align_gpu_trace(int ranks, const std::vector<RankStart>& starts,
                      const std::vector<GpuComputeTiming>& compute,
                      const std::vector<GpuCommTiming>& comm,
                      const std::vector<GpuUpdateTiming>& updates = {});

}  // namespace ppbench
