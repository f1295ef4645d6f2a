#include "harness/cli/program_beside.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

#include "core/error.h"

namespace ppbench::cli {

namespace {
int g_argc = 0;
char** g_argv = nullptr;

// `program` beside the executable itself (symbolic links resolved), not on PATH: the programs are
// built and bundled together, and another one on PATH could be another version.
std::string path_beside_self(const std::string& program, std::error_code& ec) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : (self.parent_path() / program).string();
}
}  // namespace

void remember_command_line(int argc, char** argv) {
  g_argc = argc;
  g_argv = argv;
}

const char* cuda_program_name() {
#ifdef PPBENCH_CUDA_PROGRAM
  return PPBENCH_CUDA_PROGRAM;
#else
  return "";
#endif
}

const char* cuda_mpi_program_name() {
#ifdef PPBENCH_CUDA_MPI_PROGRAM
  return PPBENCH_CUDA_MPI_PROGRAM;
#else
  return "";
#endif
}

const char* mpi_program_name() {
#ifdef PPBENCH_MPI_PROGRAM
  return PPBENCH_MPI_PROGRAM;
#else
  return "";
#endif
}

bool program_beside_exists(const std::string& program) {
  if (program.empty()) return false;
  std::error_code ec;
  const std::string path = path_beside_self(program, ec);
  return !ec && ::access(path.c_str(), X_OK) == 0;
}

void exec_program_beside(const std::string& program, const std::string& need,
                         const std::string& built_without) {
  if (program.empty() || g_argv == nullptr)
    throw EnvironmentError(need + ": this ppbench was built without " + built_without);
  std::error_code ec;
  const std::string path = path_beside_self(program, ec);
  if (ec)
    throw EnvironmentError(
        need + ": cannot find this program's own path (/proc/self/exe: " + ec.message() + ")");
  if (::access(path.c_str(), X_OK) != 0)
    throw EnvironmentError(need + ": " + quoted(path) + " is missing or not executable (" +
                           std::strerror(errno) + "): such runs are made by " + program +
                           ", built and copied beside ppbench");
  std::cout.flush();
  std::cerr.flush();
  ::execv(path.c_str(), g_argv);
  throw EnvironmentError(need + ": cannot start " + quoted(path) + ": " + std::strerror(errno));
}

}  // namespace ppbench::cli
