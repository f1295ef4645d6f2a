#include "harness/mpi/gpu_process_optimizer.h"

#if PPBENCH_HAVE_NCCL_H

#include <algorithm>

#include "harness/backends/step_values.h"
#include "workloads/cuda/check.h"

namespace ppbench::mpi {

GpuProcessOptimizer::GpuProcessOptimizer(const OptimizerOptions& o, const Placement& p,
                                         const cuda::GpuDevices& devices,
                                         cuda::GpuPipelineRank& rank, int me,
                                         const std::vector<int>& stage_ids, MPI_Comm pipeline)
    : devices_(devices), rank_(rank), me_(me) {
  std::int64_t largest = 0;  // of the parameters exchanged with a twin
  const auto by_layer = rank.params_by_layer();
  for (std::size_t k = 0; k < by_layer.size(); ++k) {
    Part part;
    part.part = by_layer[k].part;
    part.stage = stage_ids.at(k);
    part.twin = p.twin_rank(part.stage);
    part.params = all_params(by_layer[k]);
    if (part.twin >= 0)
      for (const cuda::Param* prm : part.params) largest = std::max(largest, prm->grad.numel());
    parts_.push_back(std::move(part));
  }
  std::stable_sort(parts_.begin(), parts_.end(),
                   [](const Part& a, const Part& b) { return a.part < b.part; });
  // Every process of the pipeline makes the exchange's communicator, whether or not its own
  // parts have twins: ncclCommInitRank is collective.
  if (p.copies_per_part() > 1)
    twins_ = std::make_unique<GpuTwinGradients>(init_nccl_comm(pipeline), largest);
  std::vector<cuda::GpuPipelineRank*> ranks(static_cast<std::size_t>(p.ranks), nullptr);
  ranks.at(static_cast<std::size_t>(me)) = &rank;
  optimizer_ = std::make_unique<cuda::GpuOptimizer>(o, p, devices, ranks);
  devices_.rank(me).make_current();
}

double GpuProcessOptimizer::state_bytes() const { return optimizer_->state_bytes(me_); }

std::vector<UpdateEvent> GpuProcessOptimizer::step(const std::function<double()>& now) {
  const cudaStream_t stream = devices_.rank(me_).compute;
  std::vector<UpdateEvent> events;
  optimizer_->begin_step();
  for (const Part& part : parts_) {
    const double begin = now();
    if (part.twin < 0) {
      optimizer_->stage_done(me_, part.stage);  // the part's only copy: the one-process update
    } else {
      optimizer_->step_copy(me_, part.stage, [&](std::size_t k) {
        return twins_->summed(part.twin, *part.params.at(k), rank_.context());
      });
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    events.push_back({me_, begin, now(), part.stage});
  }
  if (twins_) twins_->settled();
  return events;
}

}  // namespace ppbench::mpi

#endif  // PPBENCH_HAVE_NCCL_H
