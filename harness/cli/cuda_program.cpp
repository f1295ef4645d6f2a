#include "harness/cli/cuda_program.h"

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

void exec_cuda_program() {
  const std::string name = cuda_program_name();
  if (name.empty() || g_argv == nullptr)
    throw EnvironmentError("--backend cuda: this ppbench was built without CUDA (no nvcc found)");
  // Beside the executable itself (symbolic links resolved), not on PATH: the two programs are
  // built and bundled together, and a different ppbench-cuda on PATH could be another version.
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw EnvironmentError("--backend cuda: cannot find this program's own path (/proc/self/exe: " +
                           ec.message() + ")");
  const std::string path = (self.parent_path() / name).string();
  if (::access(path.c_str(), X_OK) != 0)
    throw EnvironmentError("--backend cuda: " + quoted(path) + " is missing or not executable (" +
                           std::strerror(errno) + "): CUDA runs are made by " + name +
                           ", built and copied beside ppbench");
  std::cout.flush();
  std::cerr.flush();
  ::execv(path.c_str(), g_argv);
  throw EnvironmentError("--backend cuda: cannot start " + quoted(path) + ": " +
                         std::strerror(errno));
}

}  // namespace ppbench::cli
