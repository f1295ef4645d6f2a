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
//
// CUDA-graph mode (options.cuda_graph, docs/cuda-graphs.md): run_step(kGraph) captures each
// rank's step once, on its own thread (step_graph.h), then every kGraph step launches the
// graphs instead of walking the plan. What a replay relies on:
//   - addresses: the host-side allocations of the capture decide every address the graph uses;
//     replays allocate nothing, sent tensors are released only after the capture (never reused
//     within a step), and a launch refuses to run if a rank's activation arena changed since
//     the capture (something allocated there and could overlap the graph's buffers);
//   - state: gradients are zeroed before each launch, outside the graph, by the caller; loss
//     tensors captured with the graph must stay alive (GpuPipelineRank::zero_grad(true));
//   - timing: actions and transfers are timed by event-record nodes (per_action_timing); if the
//     driver refuses to time them the step reports only its launch-to-completion time;
//   - watchdog: the host sees one launch per rank, so the limit applies to the whole step and
//     the error cannot name the transfer that hangs (rerun without --cuda-graph for that).
// Eager steps must all come before the capture (a replay's timing events belong to its graph).
//
// The optimizer step (set_stage_done, harness/cuda/gpu_optimizer.h): right after a stage's last
// backward on a rank, the walk calls the hook on the rank's thread, between two timing events on
// its compute stream; what it launched is timed into the trace's UpdateEvents (busy time), eager
// and captured alike, as the CPU executor's RankHooks::stage_done.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_transport.h"
#include "harness/cuda/trace_align.h"
#include "harness/executor/activation_arena.h"
#include "harness/executor/executor_core.h"
#include "harness/executor/stage_work.h"
#include "harness/trace.h"
#include "schedules/lower.h"
#include "schedules/schedule.h"
#include "workloads/cuda/tensor.h"

namespace ppbench {
struct NcclPlan;  // harness/cuda/nccl_plan.h, forward-declared to keep this header light

}

namespace ppbench::cuda {

class EventPool;
class GpuTransport;
class StepGraph;

struct CudaExecutorOptions {
  double watchdog_seconds = 60;  // longest a rank may wait on a transfer or a peer
  bool cuda_graph = false;       // allow run_step(StepMode::kGraph); the transport must capture
};

enum class StepMode { kEager, kGraph };

// What a step launched from CUDA graphs adds to its record.
struct GraphStepInfo {
  // false: cudaEventElapsedTime refused the graph's timing events; the record's trace is then
  // empty and only step_seconds was measured.
  bool per_action_timing = true;
  double step_seconds = 0;               // first launch to last completion over the ranks
  std::vector<double> launch_to_done_s;  // per rank
};

struct CudaStepRecord {
  Trace trace;
  std::vector<ActivationArena> arenas;    // per rank: bytes kept for later passes (Saved)
  std::vector<double> device_peak_bytes;  // per rank: the DeviceArena's peak in the step
  std::optional<GraphStepInfo> graph;     // graph steps only
  double host_start_s = 0;  // run_rank_step: the trace's zero on the host's steady clock
};

// Per rank, what the capture produced (host time, graph size); empty before the capture.
struct GraphCaptureInfo {
  std::vector<double> capture_seconds;
  std::vector<std::size_t> nodes, event_record_nodes;
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
  // kGraph needs options.cuda_graph; its first call captures every rank's step, then launches.
  CudaStepRecord run_step(StepMode mode = StepMode::kEager);
  // One rank's eager step on the calling thread, the other ranks run by other processes
  // (harness/mpi/cuda_mpi_run.h): only work[r] and arenas[r] need exist. The trace holds rank
  // r's events, their times from host_start_s (cuda_executor_rank.cpp).
  CudaStepRecord run_rank_step(int r);
  bool graph_captured() const { return captured_; }
  const GraphCaptureInfo& capture_info() const { return capture_info_; }
  const NcclPlan& plan() const { return *plan_; }
  int hoisted_receives() const;  // of the plan, for records
  int deferred_sends() const;
  const Program& program() const { return program_; }
  // Called as hook(rank, stage) after the last backward of each stage on its rank, with the rank's
  // context current; returns whether it enqueued work to time (an UpdateEvent). Set before a step.
  using StageDone = std::function<bool(int rank, int stage)>;
  void set_stage_done(StageDone hook);

 private:
  struct RankResult {
    RankStart start{};
    std::vector<GpuComputeTiming> compute;
    std::vector<GpuCommTiming> comm;
    std::vector<std::pair<std::size_t, double>> memory;  // (compute event index, live bytes)
    std::vector<GpuUpdateTiming> updates;
  };
  // What a rank's capture keeps for its replays: the events its graph records and what each
  // one times, the memory samples of the capture (the same host bookkeeping every replay),
  // and the events around each launch.
  struct RankGraph {
    std::unique_ptr<StepGraph> graph;
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> compute_events;
    std::vector<Action> compute_actions;
    std::vector<std::pair<std::size_t, double>> memory;
    std::vector<GpuCommTiming> comm;  // start/end unused: filled per replay from comm_events
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> comm_events;
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> update_events;
    std::vector<int> update_stages;
    cudaEvent_t launched = nullptr, done = nullptr;
    std::size_t arena_in_use = 0;  // the activation arena after the capture
    double device_peak_bytes = 0;
    double capture_seconds = 0;
  };
  // What one walk of a rank's plan leaves: the compute actions with their timing events and
  // memory samples, and the transfers with theirs.
  struct RankWalk {
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> compute_events;
    std::vector<Action> compute_actions;
    std::vector<std::pair<std::size_t, double>> memory;  // (compute index, live bytes)
    std::vector<TransferTiming> timings;
    std::vector<PendingTransfer> pending;                            // eager walks only
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> update_events;  // optimizer steps
    std::vector<int> update_stages;
  };
  // Walks rank r's plan once: eagerly (kernels and transfers run) or into a capture (nothing
  // runs). False when the transport was aborted (another rank failed first); the watchdog's
  // and every other failure go to errors_.
  bool walk_plan(int r, bool capturing, RankWalk& walk);
  void run_rank(int r, RankResult& out);
  void capture_rank(int r, RankGraph& g);
  void replay_rank(int r, RankResult& out, bool& per_action, double& launch_to_done);
  void capture_all();
  // After a failed step: waits (at most a few seconds) for every rank's streams, whose kernels
  // may still use the arenas that the failure's unwinding frees.
  void drain_after_failure();
  CudaStepRecord assemble(const std::vector<RankResult>& results, bool with_trace);

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
  RankStages stages_;
  Watchdog watchdog_;
  StepErrors errors_;
  std::vector<std::unique_ptr<EventPool>> events_;
  std::vector<RankGraph> graphs_;  // after events_: destroyed first, its nodes use those events
  bool captured_ = false;
  GraphCaptureInfo capture_info_;
  StageDone stage_done_;
  std::vector<std::vector<std::pair<std::size_t, int>>> stage_ends_;  // per rank: (step, stage)
};

}  // namespace ppbench::cuda
