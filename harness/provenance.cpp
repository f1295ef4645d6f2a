#include "harness/provenance.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "ppbench_build_info.h"

namespace ppbench {

namespace {

std::string first_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
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

// Running git cost every command 10-15 ms. Follows a worktree's `.git` file and `commondir`, and
// a symbolic HEAD to its loose or packed ref.
std::string checked_out_commit(const std::filesystem::path& source) {
  std::filesystem::path git = source / ".git";
  std::error_code ec;
  if (std::filesystem::is_regular_file(git, ec)) {
    const std::string line = first_line(git);
    if (line.rfind("gitdir: ", 0) != 0) return "";
    const std::filesystem::path dir = line.substr(8);
    git = dir.is_absolute() ? dir : source / dir;
  }
  std::string head = first_line(git / "HEAD");
  if (head.rfind("ref: ", 0) == 0) {
    const std::string ref = head.substr(5);
    std::filesystem::path common = git;
    if (const std::string c = first_line(git / "commondir"); !c.empty())
      common = std::filesystem::path(c).is_absolute() ? std::filesystem::path(c) : git / c;
    head = first_line(git / ref);
    if (head.empty()) head = first_line(common / ref);
    if (head.empty()) {
      std::ifstream packed(common / "packed-refs");
      std::string line;
      while (std::getline(packed, line))
        if (line.size() > 41 && line.compare(41, std::string::npos, ref) == 0) {
          head = line.substr(0, 40);
          break;
        }
    }
  }
  const bool hex = head.size() >= 40 && head.find_first_not_of("0123456789abcdef") >= 40;
  return hex ? head.substr(0, 12) : "";
}

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
  const std::string tree = checked_out_commit(PPBENCH_SOURCE_DIR);
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
