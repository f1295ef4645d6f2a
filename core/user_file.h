// Reading a file the user named on the command line (a schedule file, a device profile): only a
// regular file, sized before it is read and bounded while it is read, every refusal a UsageError
// that starts with the flag and the quoted path. One home for this so the two readers refuse a
// FIFO, /dev/zero or a directory the same way.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "core/error.h"

namespace ppbench {

// The size of the regular file at `path`. `flag` is how the message names it ("--schedule-file
// 'x.txt'"); `expected` says what it should have been ("a JSON device profile"). A device, FIFO
// or directory has no size to bound, and /dev/zero would be read until memory runs out: only a
// regular file is accepted.
inline std::uintmax_t user_file_size(const std::string& flag, const std::string& path,
                                     std::string_view expected) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw UsageError(flag + ": no such file");
  if (!std::filesystem::is_regular_file(status))
    throw UsageError(flag + ": not a regular file (expected " + std::string(expected) + ")");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw UsageError(flag + ": cannot read it (" + ec.message() + ")");
  return size;
}

// The text of `path`, read in pieces and refused with `past_bound` once it passes `max_bytes`:
// a file that grew since its size was taken is stopped at the bound, not read to its end.
inline std::string read_user_file(const std::string& flag, const std::string& path,
                                  std::uintmax_t max_bytes, const std::string& past_bound) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(flag + ": cannot open it for reading (permission?)");
  std::string text;
  std::array<char, 1 << 16> piece{};
  while (in.read(piece.data(), piece.size()) || in.gcount() > 0) {
    text.append(piece.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) throw UsageError(past_bound);
  }
  if (in.bad()) throw UsageError(flag + ": cannot read it");
  return text;
}

}  // namespace ppbench
