// `run --backend cuda` in a separate program. ppbench itself links no CUDA, cuBLAS or NCCL, so
// that list, show, simulate, model and CPU runs start in milliseconds without mapping hundreds
// of megabytes of GPU libraries; ppbench-cuda is the same command line linked with the CUDA
// backend, built beside it, and ppbench hands it the whole command line (exec, same process id,
// same stdout and stderr) once the flags are known to ask for CUDA.
#pragma once

namespace ppbench::cli {

// main() records its arguments here before parsing.
void remember_command_line(int argc, char** argv);

// The CUDA program beside this executable ("" when this build has none).
const char* cuda_program_name();

// Replaces this process with the CUDA program, given the same arguments. Throws
// EnvironmentError naming the path when the program is missing or cannot be started.
[[noreturn]] void exec_cuda_program();

}  // namespace ppbench::cli
