// Results and traces are never half-written: write a sibling temp file, then
// rename it over the target (atomic on POSIX within one file system).
#pragma once

#include <string>
#include <string_view>

namespace ppbench {

// Throws UsageError naming the path when it cannot be written.
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace ppbench
