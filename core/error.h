// Errors the user can fix (bad flags, bad schedule parameters, bad costs): the CLI turns them
// into a one-line message and exit code 2. Problems of the machine or its environment (no GPU
// visible, a library that cannot be loaded, too little memory): exit code 3. Anything else
// escaping main is a bug (exit code 1).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ppbench {

class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class EnvironmentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The machine's memory, host or device, ran out while working: its limit (exit code 3), not a
// failed step. An exception of this kind on a rank's thread keeps its kind when the step
// rethrows it (harness/executor/executor_core.h).
class OutOfMemory : public EnvironmentError {
 public:
  using EnvironmentError::EnvironmentError;
};

// A measurement that ran but failed its own check (`run --check` past its tolerance): the record
// is written, then exit code 1 with one line.
class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A schedule that breaks a dependency, the placement, or deadlocks. Carries the
// rank and action that break it in the message.
class InvalidSchedule : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // `rank`: the rank whose order breaks the schedule, so that a schedule read from a file can
  // name the line that lists that rank (schedules/schedule_file.h).
  InvalidSchedule(const std::string& message, int rank)
      : std::runtime_error(message), rank_(rank) {}
  int rank() const { return rank_; }  // -1: the message names no single rank

 private:
  int rank_ = -1;
};

namespace detail {

// Appends `s` with every byte a terminal could act on escaped: C0 controls as \n, \r, \t or
// \xNN, DEL, C1 controls (U+0080..U+009F) and bytes that are not UTF-8 as \xNN. With
// `quote_chars`, backslash and ' are escaped too (\\, \'), so a quoted string reads back
// unambiguously.
inline void append_escaped(std::string& out, std::string_view s, bool quote_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto hex = [&out](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '\n')
        out += "\\n";
      else if (c == '\r')
        out += "\\r";
      else if (c == '\t')
        out += "\\t";
      else if (c < 0x20 || c == 0x7f)
        hex(c);
      else if (quote_chars && (c == '\\' || c == '\''))
        out += '\\', out += static_cast<char>(c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlongs, no surrogates) that is not a C1 control is
    // printable as it is; anything else is escaped byte by byte.
    std::size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    if (c >= 0xf5) len = 0;
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if (len == 2 && c == 0xc2 && c1 < 0xa0) ok = false;   // C1 controls
      if (len == 3 && c == 0xe0 && c1 < 0xa0) ok = false;   // overlong
      if (len == 3 && c == 0xed && c1 >= 0xa0) ok = false;  // surrogates
      if (len == 4 && c == 0xf0 && c1 < 0x90) ok = false;   // overlong
      if (len == 4 && c == 0xf4 && c1 >= 0x90) ok = false;  // past U+10FFFF
    }
    if (!ok) {
      hex(c);
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
}

}  // namespace detail

// User input echoed in a message, in single quotes, with control characters (newlines, terminal
// escape sequences) shown as \n, \x1b, ... so a message stays one harmless line; anything past
// 200 bytes is cut and the length said.
inline std::string quoted(std::string_view s) {
  constexpr std::size_t kMax = 200;
  std::string out = "'";
  detail::append_escaped(out, s.substr(0, kMax), true);
  out += '\'';
  if (s.size() > kMax) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}
// Text from outside (a file name) made safe to print and to put in JSON: the same escapes as
// quoted, without the quotes or the cut; what was not UTF-8 becomes \xNN.
inline std::string printable(std::string_view s) {
  std::string out;
  detail::append_escaped(out, s, false);
  return out;
}
// Exact matches for strings, so that argument-dependent lookup never prefers std::quoted
// (<iomanip>, a template) over this one.
inline std::string quoted(const std::string& s) { return quoted(std::string_view(s)); }
inline std::string quoted(std::string& s) { return quoted(std::string_view(s)); }
inline std::string quoted(const char* s) { return quoted(std::string_view(s)); }

}  // namespace ppbench
