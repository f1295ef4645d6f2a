// Whether this process was started by an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx), read
// from the environment the launcher sets, before MPI is initialised (and in builds without MPI,
// to refuse a multi-process launch clearly). srun without PMI is recognised too: its tasks are
// copies of ppbench that no MPI joins, which `run` refuses rather than running the whole job in
// each.
#pragma once

#include <functional>
#include <string>

namespace ppbench {

struct LaunchEnvironment {
  bool by_mpi = false;
  int rank = 0;          // this process among the launched ones (-1 when the launcher does not say)
  int size = 1;          // processes launched (-1 when the launcher does not say)
  std::string launcher;  // "OpenMPI", "PMIx", "PMI", "Slurm" (srun without PMI) or ""
  std::string command;   // what the user ran, for messages: "mpirun", "srun" or "the launcher"
};

LaunchEnvironment launch_environment();
// The same from any environment (tests): `getenv` returns a variable's value or nullptr.
LaunchEnvironment launch_environment_from(const std::function<const char*(const char*)>& getenv);

}  // namespace ppbench
