#include "harness/provenance.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

#include "ppbench_build_info.h"

namespace ppbench {

namespace {

std::string run(const std::string& command) {
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 256> buf{};
    while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line
                                        : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

nlohmann::json provenance() {
  // The commit this binary was built from (recorded at build time, cmake/build_info.cmake): a
  // binary left unbuilt after a checkout still names what it runs. Built from a copy without
  // .git (a lent GPU machine gets the working tree only), the commit can be handed over in
  // PPBENCH_GIT_COMMIT by whoever made the copy.
  std::string commit = PPBENCH_BUILD_COMMIT;
  if (commit == "unknown") {
    const char* given = std::getenv("PPBENCH_GIT_COMMIT");
    if (given != nullptr && *given != '\0') commit = given;
  }
  // The source tree now, where it is a git tree and differs: the record then says both.
  const std::string git = "git -C '" PPBENCH_SOURCE_DIR "' ";
  const std::string tree = run(git + "rev-parse --short=12 HEAD 2>/dev/null");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  // Timings taken while other work shares the cores are not comparable; say how busy it was.
  double load[3] = {0, 0, 0};
  nlohmann::json load_average = nlohmann::json::array();
  if (getloadavg(load, 3) == 3) load_average = {load[0], load[1], load[2]};
  nlohmann::json out = {{"ppbench_version", PPBENCH_VERSION},
                        {"git_commit", commit},
                        {"host", host},
                        {"cpu", cpu_model()},
                        {"cpu_cores", sysconf(_SC_NPROCESSORS_ONLN)},
                        {"load_average", load_average},
                        {"compiler", std::string("gcc ") + __VERSION__},
                        {"date", utc_now()},
#ifdef PPBENCH_HAVE_CUDA
                        {"cuda", "compiled"}
#else
                        {"cuda", "not compiled"}
#endif
  };
  if (!tree.empty() && commit.rfind(tree, 0) != 0) out["source_tree_commit"] = tree;
  return out;
}

}  // namespace ppbench
