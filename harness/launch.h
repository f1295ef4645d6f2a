// Whether this process was started by an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx), read
// from the environment the launcher sets, before MPI is initialised (and in builds without MPI,
// to refuse a multi-process launch clearly).
#pragma once

#include <string>

namespace ppbench {

struct LaunchEnvironment {
  bool by_mpi = false;
  int rank = 0;          // this process among the launched ones (-1 when the launcher does not say)
  int size = 1;          // processes launched (-1 when the launcher does not say)
  std::string launcher;  // "OpenMPI", "PMIx", "PMI", "Slurm" or ""
};

LaunchEnvironment launch_environment();

}  // namespace ppbench
