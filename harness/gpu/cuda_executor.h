// Runs one training step of a schedule on GPUs: one host thread per rank walking the NCCL plan
// built from its lowered program (computes, and groups of sends and receives), a compute and a
// communication stream per rank, CUDA events around every action and transfer turned into the
// common Trace by trace_align, NVTX ranges on both, and each rank's activation memory drawn
// from its own DeviceArena. The GPU mirror of harness/executor/cpu_executor.h.
//
// The host threads run ahead of their GPUs: nothing synchronises inside a step except a
// receive on the copy transport, which waits on the host for its sender's message. The
// watchdog covers both kinds of waiting: a host wait longer than the limit, or a transfer
// whose event has not completed within the limit at the end of the step, stops the step with
// an error naming the rank, the lowered instruction and the peer.
//
// Before any launch the plan is proven deadlock-free under NCCL's rendezvous semantics
// (p2p_deadlock_check.h); the copy transport buffers sends, so the same plan is safe there too.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "harness/executor/activation_arena.h"
#include "harness/executor/stage_work.h"
#include "harness/gpu/gpu_devices.h"
#include "harness/gpu/trace_align.h"
#include "harness/trace.h"
#include "schedules/lower.h"
#include "schedules/schedule.h"
#include "workloads/cuda/tensor.h"

namespace ppbench {
struct NcclPlan;  // harness/gpu/nccl_plan.h, forward-declared to keep this header light

}

namespace ppbench::gpu {

class EventPool;
class GpuTransport;

struct CudaExecutorOptions {
  double watchdog_seconds = 60;  // longest a rank may wait on a transfer or a peer
};

struct CudaStepRecord {
  Trace trace;
  std::vector<ActivationArena> arenas;  // per rank: bytes kept for later passes (Saved)
  std::vector<double> device_peak_bytes;  // per rank: the DeviceArena's peak in the step
};

// Builds the transfer plan (nccl_plan.h) of a schedule whose stage s sends tensors of
// `stage_output_shapes[s]` (its F output; the last stage of a chain sends nothing, its entry may
// be empty) and proves it deadlock-free, as the executor does before any launch. Host-only.
// Throws InvalidSchedule naming the rank and group that would hang.
void check_transfer_plan(const Schedule& s, const std::vector<cuda::Shape>& stage_output_shapes,
                         cuda::DType dtype);

class CudaExecutor {
 public:
  using Work = StageWork<cuda::DTensor>;
  // work[r], arenas[r] belong to rank r and are touched only by its thread during a step.
  CudaExecutor(const Schedule& s, const GpuDevices& devices, std::vector<Work*> work,
               std::vector<cuda::DeviceArena*> arenas, GpuTransport& transport,
               std::vector<cuda::Shape> stage_output_shapes, cuda::DType dtype,
               CudaExecutorOptions options);

  ~CudaExecutor();
  CudaStepRecord run_step();
  const NcclPlan& plan() const { return *plan_; }
  int hoisted_receives() const;  // of the plan, for records
  int deferred_sends() const;
  const Program& program() const { return program_; }

 private:
  struct RankResult {
    RankStart start{};
    std::vector<GpuComputeTiming> compute;
    std::vector<GpuCommTiming> comm;
    std::vector<std::pair<std::size_t, double>> memory;  // (compute event index, live bytes)
  };
  void run_rank(int r, RankResult& out);
  void fail(const std::string& message);

  const Schedule& schedule_;
  const GpuDevices& devices_;
  Program program_;
  std::vector<Work*> work_;
  std::vector<cuda::DeviceArena*> arenas_;
  GpuTransport& transport_;
  std::vector<cuda::Shape> shapes_;
  cuda::DType dtype_;
  CudaExecutorOptions options_;
  std::unique_ptr<NcclPlan> plan_;
  std::vector<std::vector<int>> stages_of_rank_;
  std::vector<std::unique_ptr<EventPool>> events_;
  std::mutex error_mutex_;
  std::string error_;
};

}  // namespace ppbench::gpu
