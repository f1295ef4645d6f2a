// What GPU processes of one job say to each other beside the pipeline's own transfers, all over
// NCCL communicators bootstrapped through MPI (nccl_bootstrap.h): the replicas' gradient
// all-reduce (`--dp R`), and the exchange that sums the two copies of a model part that Chimera
// and DualPipe keep on two pipeline ranks before the optimizer updates them. Only with nccl.h at
// build time (PPBENCH_HAVE_NCCL_H).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "harness/backends/step_values.h"
#include "harness/cuda/nccl_api.h"
#include "harness/trace.h"
#include "workloads/cuda/arena.h"
#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

#if PPBENCH_HAVE_NCCL_H

namespace ppbench::mpi {

// ncclCommInitRank over the processes of `comm`, process 0's unique id broadcast over MPI.
// Collective: every process of `comm` makes its communicators in the same order. The calling
// thread's current device is the GPU the rank takes.
ncclComm_t init_nccl_comm(MPI_Comm comm);

// The gradients of one pipeline rank summed across the replicas: one grouped ncclAllReduce per
// stage on a stream of its own, either once the rank's step is done (run), or overlapped
// (--dp-overlap): each stage's all-reduce enqueued right after its last backward (start), while
// the rank's walk goes on with other stages' work, and waited for after the step (finish).
//
// Overlapped, the all-reduce stream runs NCCL kernels beside the pipeline's own send/receive
// kernels on another communicator. Every replica issues both in the same order (the same
// schedule), which NCCL asks of concurrent communicators; it is what Megatron-LM does too.
class GpuGradientAllReduce {
 public:
  // stage_ids[k]: the schedule's stage of stages[k] (for the trace). Owns `comm`.
  GpuGradientAllReduce(ncclComm_t comm, std::vector<StageParams<cuda::Param>> stages,
                       std::vector<int> stage_ids, int rank);
  ~GpuGradientAllReduce();
  GpuGradientAllReduce(const GpuGradientAllReduce&) = delete;
  GpuGradientAllReduce& operator=(const GpuGradientAllReduce&) = delete;

  // After everything on `compute`; returns the all-reduce of each stage, host-timed on `clock`
  // (seconds on the step's clock): the rank's own step is complete when it starts, so its time
  // is all exposed.
  template <class Clock>
  std::vector<CollectiveEvent> run(cudaStream_t compute, const Clock& clock) {
    failed_ = true;  // until it completes: a failure leaves the communicator to abort
    after(compute);
    std::vector<CollectiveEvent> out;
    for (std::size_t k = 0; k < stages_.size(); ++k) {
      const double start = clock();
      const double bytes = reduce_stage(k);
      out.push_back({rank_, start, clock(), ids_.at(k), bytes});
    }
    failed_ = false;
    return out;
  }

  // Overlapped: before the rank's step, with `compute` idle (synchronised): notes the step's
  // origin, a GPU event and its time on `clock`, to place the all-reduces on the step's clock.
  template <class Clock>
  void begin_step(cudaStream_t compute, const Clock& clock) {
    failed_ = true;  // until finish(): a failure leaves the communicator to abort
    begin_step_at(compute);
    origin_s_ = clock();
  }
  // Overlapped: `stage`'s last backward on this rank has been enqueued on `compute`: enqueues
  // its all-reduce after it and returns at once. Only the rank's own stages.
  void start(int stage, cudaStream_t compute);
  // Overlapped: after the rank's step, waits for every all-reduce started and returns each,
  // timed by its events on the GPU: from when the stream could run it to its end.
  std::vector<CollectiveEvent> finish();

 private:
  void after(cudaStream_t compute);
  void enqueue_stage(std::size_t k);   // the stage's grouped all-reduce on stream_
  double reduce_stage(std::size_t k);  // enqueues and waits; returns the bytes reduced
  double stage_bytes(std::size_t k) const;
  void begin_step_at(cudaStream_t compute);

  ncclComm_t comm_ = nullptr;
  std::vector<StageParams<cuda::Param>> stages_;
  std::vector<int> ids_;
  std::int32_t rank_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  bool failed_ = false;
  // Overlapped: the step's origin (recorded on compute, its time on the step's clock) and, per
  // stage, the timing events around its all-reduce and whether it started this step.
  cudaEvent_t origin_ = nullptr;
  double origin_s_ = 0;
  std::vector<cudaEvent_t> began_, ended_;
  std::vector<bool> started_;
};

// Sums a model part's gradients with its other copy's, held by the twin pipeline rank (Chimera,
// DualPipe), parameter by parameter: both ranks send their copy's gradient and receive the
// other's in one NCCL group on the compute stream, then add their own to it. a + b equals b + a
// exactly, so both ranks get the same sum and their updates stay the same. The copies' own
// gradients are left as they are (the record reports each copy's).
class GpuTwinGradients {
 public:
  // `comm`: the replica's pipeline (a communicator of its own, owned here); `largest`: the
  // elements of the largest parameter exchanged (the receive buffer's size).
  GpuTwinGradients(ncclComm_t comm, std::int64_t largest);
  ~GpuTwinGradients();
  GpuTwinGradients(const GpuTwinGradients&) = delete;
  GpuTwinGradients& operator=(const GpuTwinGradients&) = delete;

  // Enqueues, on ctx.stream, the exchange of p's gradient with pipeline rank `twin` and the sum;
  // returns the sum's buffer, valid in stream order until the next call. Both ranks go through
  // the part's parameters in the same order.
  const float* summed(int twin, const cuda::Param& p, cuda::Context& ctx);
  // Once the stream that ran the exchanges is synchronised: the communicator is then destroyed,
  // not aborted, when this goes (a step that failed before leaves it to abort).
  void settled() { failed_ = false; }

 private:
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<cuda::DeviceArena> arena_;
  cuda::DTensor received_;
  bool failed_ = false;
};

}  // namespace ppbench::mpi

#endif  // PPBENCH_HAVE_NCCL_H
