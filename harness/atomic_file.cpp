#include "harness/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "schedules/error.h"

namespace ppbench {

void write_file_atomically(const std::string& path, std::string_view content) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir))
    throw UsageError("cannot write '" + path + "': directory '" + dir.string() + "' does not exist");
  const fs::path tmp = dir / ("." + target.filename().string() + ".tmp." + std::to_string(getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw UsageError("cannot write '" + path + "': " + std::strerror(errno));
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw UsageError("cannot write '" + path + "': " + ec.message());
  }
}

}  // namespace ppbench
