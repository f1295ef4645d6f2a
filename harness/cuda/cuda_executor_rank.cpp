// CudaExecutor::run_rank_step: one rank of the schedule per process (mpirun), its peers in other
// processes reached through the transport's communicator. The same walk as a rank thread of
// run_step (run_rank), on the calling thread, then the rank's sent tensors reclaimed.
#include "harness/cuda/cuda_executor.h"
#include "harness/cuda/gpu_transport.h"

namespace ppbench::cuda {

CudaStepRecord CudaExecutor::run_rank_step(int r) {
  const int ranks = schedule_.placement.ranks;
  if (r < 0 || r >= ranks || work_.at(static_cast<std::size_t>(r)) == nullptr ||
      arenas_.at(static_cast<std::size_t>(r)) == nullptr)
    throw std::logic_error("run_rank_step(" + std::to_string(r) + ") without that rank's work");
  if (captured_) throw std::logic_error("run_rank_step after a CUDA-graph capture");
  std::vector<RankResult> results(static_cast<std::size_t>(ranks));
  errors_.clear();
  transport_.begin_step();
  arenas_[static_cast<std::size_t>(r)]->reset_peak();
  try {
    run_rank(r, results[static_cast<std::size_t>(r)]);
    devices_.rank(r).make_current();
    transport_.reclaim(r, true);
  } catch (const std::exception& e) {
    errors_.fail(r, e);
  }
  errors_.rethrow();
  // The other ranks' entries are empty: their start is this rank's, so that the alignment
  // leaves this rank's times as measured from its start.
  const double start = results[static_cast<std::size_t>(r)].start.host_seconds;
  for (int k = 0; k < ranks; ++k)
    if (k != r) results[static_cast<std::size_t>(k)].start = {k, start};
  CudaStepRecord record = assemble(results, true);
  record.host_start_s = start;
  return record;
}

}  // namespace ppbench::cuda
