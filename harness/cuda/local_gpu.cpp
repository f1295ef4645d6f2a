#include "harness/cuda/local_gpu.h"

#include <cstdlib>

#include "core/error.h"

namespace ppbench {

LocalRank local_rank_from_env(const std::function<const char*(const char*)>& getenv) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end != '\0' || x < 0 || x >= (1L << 20))
      throw UsageError(std::string(name) + "=" + quoted(v) +
                       ": the launcher's local rank must be a non-negative integer");
    return {static_cast<int>(x), name};
  }
  return {};
}

int gpu_of_local_rank(int local_rank, int local_processes, int visible_gpus) {
  if (local_processes < 1 || local_rank < 0 || local_rank >= local_processes)
    throw std::logic_error("local rank " + std::to_string(local_rank) + " of " +
                           std::to_string(local_processes));
  // One process per GPU: two processes on one GPU would each size their arenas for the whole
  // device, and NCCL refuses two ranks of one communicator on one GPU.
  if (visible_gpus < local_processes)
    throw UsageError("a GPU count that does not match: this node runs " +
                     std::to_string(local_processes) + " processes of the job but shows " +
                     std::to_string(visible_gpus) + " GPU" + (visible_gpus == 1 ? "" : "s") +
                     " (--backend cuda across processes takes one GPU per process: start at most " +
                     std::to_string(visible_gpus) + " per node)");
  return local_rank;
}

}  // namespace ppbench
