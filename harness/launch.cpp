#include "harness/launch.h"

#include <cstdlib>
#include <string>

namespace ppbench {

LaunchEnvironment launch_environment_from(const std::function<const char*(const char*)>& getenv) {
  const auto env_int = [&getenv](const char* name) {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') return -1;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    return (*end == '\0' && x >= 0 && x < (1L << 30)) ? static_cast<int>(x) : -1;
  };
  // srun sets SLURM_STEP_NUM_TASKS for the tasks of a step (a batch script's own environment has
  // SLURM_NTASKS and SLURM_PROCID=0 but no step): then "srun" is what the user ran.
  const int step_tasks = env_int("SLURM_STEP_NUM_TASKS");
  const bool by_srun = step_tasks >= 0 && env_int("SLURM_PROCID") >= 0;
  // Each launcher's own variables, most specific first. PMIx and PMI are also what srun gives
  // with --mpi=pmix or pmi2, and then srun is what the user ran.
  struct Source {
    const char *rank, *size, *name;
    bool srun_may_start;
  };
  static constexpr Source kSources[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OpenMPI", false},
      {"PMIX_RANK", "SLURM_NTASKS", "PMIx", true},
      {"PMI_RANK", "PMI_SIZE", "PMI", true},
  };
  for (const Source& s : kSources) {
    const int rank = env_int(s.rank);
    if (rank < 0) continue;
    if (!s.srun_may_start) return {true, rank, env_int(s.size), s.name, "mpirun"};
    // Under srun the step's own count; SLURM_NTASKS is the allocation's outside a step.
    const int size = by_srun ? step_tasks : env_int(s.size);
    return {true, rank, size, s.name, by_srun ? "srun" : "the launcher"};
  }
  // srun alone (no --mpi=pmix or pmi2) starts copies of a program, not an MPI job.
  if (by_srun && step_tasks > 1)
    return {false, env_int("SLURM_PROCID"), step_tasks, "Slurm", "srun"};
  return {};
}

LaunchEnvironment launch_environment() {
  return launch_environment_from([](const char* name) { return std::getenv(name); });
}

}  // namespace ppbench
