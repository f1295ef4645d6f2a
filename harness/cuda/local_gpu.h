// Which GPU a process of an mpirun job takes: one process per GPU, the GPU numbered by the
// process's rank among the processes of its node (its local rank). Host-only (no CUDA calls), so
// the arithmetic and the refusals are tested on machines without a GPU.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>

namespace ppbench {

struct LocalRank {
  int rank = -1;       // -1: no launcher variable says
  std::string source;  // the variable it came from
};

// The local rank the launcher gives in the environment: OMPI_COMM_WORLD_LOCAL_RANK (OpenMPI),
// SLURM_LOCALID (srun), MPI_LOCALRANKID (MPICH's Hydra), the first one set. A set but malformed
// value is a UsageError naming it. `getenv` is replaceable for tests.
LocalRank local_rank_from_env(const std::function<const char*(const char*)>& getenv =
                                  [](const char* n) { return std::getenv(n); });

// The CUDA ordinal of local rank `local_rank` of `local_processes` on a node that shows
// `visible_gpus` devices: the local rank itself. Throws UsageError (one line) when the node shows
// fewer GPUs than it runs processes: "a GPU count that does not match".
int gpu_of_local_rank(int local_rank, int local_processes, int visible_gpus);

}  // namespace ppbench
