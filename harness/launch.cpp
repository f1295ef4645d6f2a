#include "harness/launch.h"

#include <cstdlib>
#include <string>

namespace ppbench {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (*end == '\0' && x >= 0 && x < (1L << 30)) ? static_cast<int>(x) : -1;
}

}  // namespace

LaunchEnvironment launch_environment() {
  // Each launcher's own variables, most specific first. srun alone (SLURM_PROCID without PMI or
  // PMIx) starts copies of a program, not an MPI job, so it does not count.
  struct Source {
    const char *rank, *size, *name;
  };
  static constexpr Source kSources[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OpenMPI"},
      {"PMIX_RANK", "SLURM_NTASKS", "PMIx"},
      {"PMI_RANK", "PMI_SIZE", "PMI"},
  };
  for (const Source& s : kSources) {
    const int rank = env_int(s.rank);
    if (rank < 0) continue;
    return {true, rank, env_int(s.size), s.name};
  }
  return {};
}

}  // namespace ppbench
