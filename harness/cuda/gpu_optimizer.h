// The optimizer step of `run --backend cuda --optimizer sgd|adamw`: the GPU mirror of the CPU
// run's per-part optimizer (harness/backends/cpu/part_optimizer.h and cpu_run.cpp). Each rank
// updates a stage right after the stage's last backward, on its compute stream (the executor
// calls stage_done from the rank's thread; harness/cuda/cuda_executor.h), with the kernels of
// workloads/cuda/optimizer.h and the hyper-parameters of harness/optimizer.h.
//
// Every copy of a model part keeps its own state (AdamW's f32 moments, an f32 master copy of bf16
// parameters, its step counter) in its rank's own device arena. Chimera and DualPipe hold two
// copies of a part on two ranks: both are updated from their summed gradients by the rank whose
// host thread reaches the part's end second. That rank waits on its stream for the other copy's
// last backward (an event), sums the two gradients into scratch, updates its own copy, then
// brings the other copy's parameters and state over (device copies work across green contexts
// and GPUs, where a kernel could not read them), updates them with that copy's own state and
// writes them back. Nothing else touches a part's parameters after its last backward within a
// step, and every stream is drained between steps.
//
// Across processes (harness/mpi/gpu_process_optimizer.h) a process holds one pipeline rank: the
// others are absent (null in `ranks`), a part then has one copy here, and the process updates it
// with step_copy() from the two copies' summed gradients, which it gets over NCCL.
//
// CUDA graphs: a part with one copy is updated inside the captured step (AdamW's counter lives
// on the device, so replays step t on). Two copies need a wait across two ranks' graphs, which
// stand alone (cuda_executor.h): `--cuda-graph` with an optimizer is refused for schedules with
// two copies of a part (check_gpu_optimizer).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_model.h"
#include "harness/optimizer.h"
#include "schedules/schedule.h"
#include "workloads/cuda/arena.h"
#include "workloads/cuda/optimizer.h"

namespace ppbench::cuda {

// Host-side: UsageError for `--cuda-graph` with sgd or adamw when a part has two copies.
void check_gpu_optimizer(const Placement& p, const OptimizerOptions& o, bool cuda_graph);

// Device bytes the optimizer of `rank` allocates (states, master copies, scratch for summing two
// copies) for sizing the activation arena beside it; an upper bound, not the record's count.
std::size_t optimizer_reserve_bytes(const WorkloadSpec& spec, const PartitionPlan& plan,
                                    const Placement& p, int rank, OptimizerOptions::Kind kind);

class GpuOptimizer {
 public:
  // Allocates every copy's state with its rank's context current (left current: the caller
  // releases). ranks[r] is null where another process runs rank r. bf16 parameters get their f32
  // master copies (SGD and AdamW), widened from them; the streams are synchronised before it
  // returns.
  GpuOptimizer(const OptimizerOptions& o, const Placement& p, const GpuDevices& devices,
               const std::vector<GpuPipelineRank*>& ranks);
  ~GpuOptimizer();
  GpuOptimizer(const GpuOptimizer&) = delete;
  GpuOptimizer& operator=(const GpuOptimizer&) = delete;

  // Before each step: no copy has arrived yet.
  void begin_step();
  // Rank r's thread, its context current, right after enqueuing the last backward of `stage`:
  // enqueues the update on r's compute stream and returns true, or false where the part's other
  // copy is not done yet (its rank updates both).
  bool stage_done(int rank, int stage);
  // Rank r's copy of `stage`'s part, updated on r's compute stream from the gradients `grad`
  // gives: grad(k) is parameter k's f32 gradient (in params_by_layer() order), enqueued on that
  // stream, and read before grad(k + 1) is asked for. For a copy whose twin is in another process.
  void step_copy(int rank, int stage, const std::function<const float*(std::size_t k)>& grad);
  // The bytes rank r's states hold (moments, master copies; not the scratch).
  double state_bytes(int rank) const;

 private:
  struct Copy {
    int rank = 0;
    std::vector<Param*> params;
    // Per parameter: m and v under AdamW only; master[k] is empty where parameter k is f32.
    std::vector<DTensor> m, v, master;
    AdamWCounter* counter = nullptr;  // inside `counter_block`
    DTensor counter_block;
    cudaEvent_t done = nullptr;  // the copy's last backward, for the twin that updates both
  };
  struct Part {
    std::vector<Copy> copies;
    std::atomic<int> arrived{0};
  };
  struct Scratch {  // per rank holding a part with two copies: one parameter's worth each
    DTensor grad, value, master, m, v, counter;
  };
  Copy& copy_of(int rank, int stage);
  void step_param(int rank, DType dtype, void* p, float* master, const float* g, float* m, float* v,
                  std::int64_t n, const AdamWCounter* counter);
  static float* master_of(const Copy& c, std::size_t k);  // nullptr: no master copy

  OptimizerOptions o_;
  const Placement& placement_;
  const GpuDevices& devices_;
  std::vector<GpuPipelineRank*> ranks_;
  std::vector<std::unique_ptr<DeviceArena>> arenas_;  // per rank: states and scratch
  std::vector<std::unique_ptr<Part>> parts_;
  std::vector<Scratch> scratch_;  // per rank
};

}  // namespace ppbench::cuda
