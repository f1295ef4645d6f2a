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

  // Whether this process leaves a message that every process of the launch would print alike
  // (they all parse the same command line) to process 0: only as one of a launch of more than
  // one process that says so, and not as process 0. A rank alone, or one that does not fit its
  // size (PMI_RANK=1 left in a shell, without PMI_SIZE or with PMI_SIZE=1), is no such launch:
  // no process 0 is there to say it, so this process says its errors itself.
  bool leaves_messages_to_process_zero() const { return size > 1 && rank > 0 && rank < size; }
};

LaunchEnvironment launch_environment();
// The same from any environment (tests): `getenv` returns a variable's value or nullptr.
LaunchEnvironment launch_environment_from(const std::function<const char*(const char*)>& getenv);

}  // namespace ppbench
