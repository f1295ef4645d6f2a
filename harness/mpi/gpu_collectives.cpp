#include "harness/mpi/gpu_collectives.h"

#if PPBENCH_HAVE_NCCL_H

#include <algorithm>
#include <array>
#include <iterator>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "harness/cuda/gpu_transport.h"
#include "harness/mpi/mpi_session.h"
#include "harness/mpi/nccl_bootstrap.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/reduce.h"

namespace ppbench::mpi {

ncclComm_t init_nccl_comm(MPI_Comm comm) {
  int rank = 0, size = 1;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES);
  const auto bytes = broadcast_from_root<NCCL_UNIQUE_ID_BYTES>(
      comm, [](std::array<char, NCCL_UNIQUE_ID_BYTES>& out) {
        ncclUniqueId id;
        cuda::nccl_check(cuda::nccl().GetUniqueId(&id), "ncclGetUniqueId");
        std::copy(std::begin(id.internal), std::end(id.internal), out.begin());
      });
  ncclUniqueId id;
  std::copy(bytes.begin(), bytes.end(), std::begin(id.internal));
  ncclComm_t c = nullptr;
  cuda::nccl_check(cuda::nccl().CommInitRank(&c, size, id, rank), "ncclCommInitRank");
  return c;
}

// ---- GpuGradientAllReduce

GpuGradientAllReduce::GpuGradientAllReduce(ncclComm_t comm,
                                           std::vector<StageParams<cuda::Param>> stages,
                                           std::vector<int> stage_ids, int rank)
    : comm_(comm),
      stages_(std::move(stages)),
      ids_(std::move(stage_ids)),
      rank_(rank),
      began_(stages_.size(), nullptr),
      ended_(stages_.size(), nullptr),
      started_(stages_.size(), false) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  // Timing events (the overlapped all-reduces are timed on the GPU, not by the host).
  CUDA_CHECK(cudaEventCreate(&origin_));
  for (std::size_t k = 0; k < stages_.size(); ++k) {
    CUDA_CHECK(cudaEventCreate(&began_[k]));
    CUDA_CHECK(cudaEventCreate(&ended_[k]));
  }
}

GpuGradientAllReduce::~GpuGradientAllReduce() {
  for (std::size_t k = 0; k < stages_.size(); ++k) {
    cudaEventDestroy(began_[k]);
    cudaEventDestroy(ended_[k]);
  }
  cudaEventDestroy(origin_);
  cudaEventDestroy(ready_);
  cudaStreamDestroy(stream_);
  cuda::release_comm(comm_, failed_);
}

void GpuGradientAllReduce::after(cudaStream_t compute) {
  CUDA_CHECK(cudaEventRecord(ready_, compute));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
}

double GpuGradientAllReduce::stage_bytes(std::size_t k) const {
  double bytes = 0;
  for (const cuda::Param* p : all_params(stages_[k])) bytes += static_cast<double>(p->grad.bytes());
  return bytes;
}

void GpuGradientAllReduce::enqueue_stage(std::size_t k) {
  cuda::nccl_group([&] {
    for (const cuda::Param* p : all_params(stages_[k])) {
      const cuda::DTensor& g = p->grad;
      cuda::nccl_check(cuda::nccl().AllReduce(
                           g.data(), g.data(), static_cast<std::size_t>(g.numel()),
                           cuda::nccl_type(cuda::plan_dtype(g.dtype())), ncclSum, comm_, stream_),
                       "ncclAllReduce");
    }
  });
}

double GpuGradientAllReduce::reduce_stage(std::size_t k) {
  enqueue_stage(k);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return stage_bytes(k);
}

void GpuGradientAllReduce::begin_step_at(cudaStream_t compute) {
  std::fill(started_.begin(), started_.end(), false);
  CUDA_CHECK(cudaEventRecord(origin_, compute));
  CUDA_CHECK(cudaEventSynchronize(origin_));
}

void GpuGradientAllReduce::start(int stage, cudaStream_t compute) {
  const auto it = std::find(ids_.begin(), ids_.end(), stage);
  if (it == ids_.end())
    throw std::logic_error("an all-reduce of stage " + std::to_string(stage) +
                           ", which this rank does not hold");
  const auto k = static_cast<std::size_t>(it - ids_.begin());
  after(compute);
  CUDA_CHECK(cudaEventRecord(began_[k], stream_));
  enqueue_stage(k);
  CUDA_CHECK(cudaEventRecord(ended_[k], stream_));
  started_[k] = true;
}

std::vector<CollectiveEvent> GpuGradientAllReduce::finish() {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<CollectiveEvent> out;
  for (std::size_t k = 0; k < stages_.size(); ++k) {
    // Every stage a rank holds has a backward on it; a stage that had none would keep stale
    // gradients, so it is an internal error rather than a silent skip.
    if (!started_[k])
      throw std::logic_error("stage " + std::to_string(ids_[k]) +
                             " ended its step without its all-reduce");
    float began_ms = 0, ended_ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&began_ms, origin_, began_[k]));
    CUDA_CHECK(cudaEventElapsedTime(&ended_ms, origin_, ended_[k]));
    out.push_back(
        {rank_, origin_s_ + began_ms * 1e-3, origin_s_ + ended_ms * 1e-3, ids_[k], stage_bytes(k)});
  }
  failed_ = false;
  return out;
}

// ---- GpuTwinGradients

GpuTwinGradients::GpuTwinGradients(ncclComm_t comm, std::int64_t largest) : comm_(comm) {
  const cuda::Shape shape = {std::max<std::int64_t>(largest, 1)};
  arena_ = std::make_unique<cuda::DeviceArena>(
      "the twin copy's gradients",
      cuda::ArenaPlan::round_up(static_cast<std::size_t>(shape[0]) * 4) + (std::size_t{4} << 10));
  received_ = cuda::DTensor(*arena_, shape, cuda::DType::kF32, "the twin copy's gradient");
}

GpuTwinGradients::~GpuTwinGradients() { cuda::release_comm(comm_, failed_); }

const float* GpuTwinGradients::summed(int twin, const cuda::Param& p, cuda::Context& ctx) {
  failed_ = true;                   // until settled(): a failure leaves the communicator to abort
  const cuda::DTensor& g = p.grad;  // f32, whatever the parameter's dtype (workloads/cuda/layer.h)
  if (g.numel() > received_.numel())
    throw std::logic_error("a twin gradient larger than the buffer sized for the largest");
  const auto n = static_cast<std::size_t>(g.numel());
  cuda::nccl_group([&] {
    cuda::nccl_check(cuda::nccl().Send(g.data(), n, ncclFloat32, twin, comm_, ctx.stream),
                     "ncclSend");
    cuda::nccl_check(cuda::nccl().Recv(received_.data(), n, ncclFloat32, twin, comm_, ctx.stream),
                     "ncclRecv");
  });
  // Stream order: the sum waits for the receive, and the next receive waits for the update
  // that reads this sum.
  cuda::add_f32(ctx, received_.as<float>(), g.as<float>(), g.numel());
  return received_.as<float>();
}

}  // namespace ppbench::mpi

#endif  // PPBENCH_HAVE_NCCL_H
