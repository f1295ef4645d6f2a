// The optimizer step of one GPU process of a multi-process run (`mpirun ... ppbench run
// --backend cuda --optimizer sgd|adamw`), after the replicas' all-reduce: the GPU side of
// process_optimizer.h. The process's stages are updated by the one-process GPU optimizer
// (harness/cuda/gpu_optimizer.h) with every other pipeline rank absent, so each part it holds has
// one copy there. Where the twin pipeline rank holds the part's other copy (Chimera, DualPipe),
// the two copies' gradients are first summed over NCCL (GpuTwinGradients), so that both
// processes apply the same update to the same parameters, as the one-process run does.
//
// Parts go in ascending order on every process, so no two processes wait on each other in a
// cycle. Each update is timed on the host around the enqueued work and a stream synchronise:
// the rank's step is over, so its time is all exposed.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <mpi.h>

#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_model.h"
#include "harness/cuda/gpu_optimizer.h"
#include "harness/mpi/gpu_collectives.h"
#include "harness/optimizer.h"
#include "harness/trace.h"
#include "schedules/placement.h"

#if PPBENCH_HAVE_NCCL_H

namespace ppbench::mpi {

class GpuProcessOptimizer {
 public:
  // `rank`: this process's pipeline rank `me` (its context current); `stage_ids`: the stages
  // of rank.params_by_layer(), in order. Collective over `pipeline` where the placement keeps
  // two copies of a part (it makes the exchange's communicator on every process).
  GpuProcessOptimizer(const OptimizerOptions& o, const Placement& p,
                      const cuda::GpuDevices& devices, cuda::GpuPipelineRank& rank, int me,
                      const std::vector<int>& stage_ids, MPI_Comm pipeline);

  // The bytes of the optimizer states this process keeps (moments, master copies).
  double state_bytes() const;

  // Updates every stage; returns the updates, timed on `now` (the step's clock).
  std::vector<UpdateEvent> step(const std::function<double()>& now);

 private:
  struct Part {
    int part = 0, stage = -1, twin = -1;  // twin: the pipeline rank with the other copy
    std::vector<cuda::Param*> params;
  };
  const cuda::GpuDevices& devices_;
  cuda::GpuPipelineRank& rank_;
  int me_;
  std::vector<Part> parts_;  // ascending part order
  std::unique_ptr<GpuTwinGradients> twins_;
  std::unique_ptr<cuda::GpuOptimizer> optimizer_;
};

}  // namespace ppbench::mpi

#endif  // PPBENCH_HAVE_NCCL_H
