// `mpirun -np P ppbench run --backend cuda --pp D --dp R ...`: one process per GPU, process w
// running pipeline rank w mod D of replica w / D (as the CPU run across processes,
// harness/mpi/mpi_run.h), on the GPU of its local rank (harness/cuda/local_gpu.h).
//
// NCCL is bootstrapped over MPI (harness/mpi/nccl_bootstrap.h): one communicator per pipeline
// (activations and gradients point-to-point, the grouped plan harness/cuda/nccl_plan.h proves
// deadlock-free) and, with R > 1, one per pipeline rank across the replicas, for the gradients'
// ncclAllReduce at the end of the step on a stream of its own. Replica d draws micro-batches
// d*N .. d*N + N - 1 and scales its losses by 1 / (R*N): the summed gradients are one device's
// over all R*N micro-batches. Process 0 gathers every trace (on its clock), replica 0's
// gradients and the memory peaks, and writes the one record.
#pragma once

#include "harness/cuda/cuda_run.h"
#include "harness/mpi/mpi_run.h"

namespace ppbench {

// Called on every process of the job. Throws JobRefused when the launch, the node's GPUs or the
// options do not fit (checked by every process together, one of them names the problem); a
// failure during the steps ends the whole job.
RunOutput run_cuda_mpi(const WorkloadSpec& spec, const CudaRunOptions& options,
                       const DataParallelOptions& dp);

}  // namespace ppbench
