// `run` in a separate program where it needs heavy libraries. ppbench itself links neither CUDA,
// cuBLAS and NCCL nor MPI, so that list, show, simulate, model and one-process CPU runs start in
// milliseconds without mapping those libraries (MPI's alone costs about a millisecond a start).
// The same command line is built twice more beside it:
//   ppbench-cuda  linked with the CUDA backend: `run --backend cuda`;
//   ppbench-mpi   linked with MPI: `run` started by mpirun (or srun) as one of several processes;
//   ppbench-cuda-mpi  linked with both (and built where nccl.h was found): `run --backend cuda`
//                 started by mpirun as one of several processes, one GPU each.
// ppbench hands such a run its whole command line (exec: same process id, same stdout and
// stderr, the launcher's environment kept) once the flags and the environment ask for it.
#pragma once

#include <string>

namespace ppbench::cli {

// main() records its arguments here before parsing.
void remember_command_line(int argc, char** argv);

// The programs beside this executable ("" when this build has none).
const char* cuda_program_name();
const char* mpi_program_name();
const char* cuda_mpi_program_name();

// Whether `program` stands beside this executable, executable (false for "").
bool program_beside_exists(const std::string& program);

// Replaces this process with `program` (cuda_program_name() or mpi_program_name()), given the
// same arguments. Throws EnvironmentError naming the path when the program is missing or cannot
// be started; `need` says what asked for it ("--backend cuda", ...), `built_without` why this
// build has none ("" when it has one).
[[noreturn]] void exec_program_beside(const std::string& program, const std::string& need,
                                      const std::string& built_without);

}  // namespace ppbench::cli
