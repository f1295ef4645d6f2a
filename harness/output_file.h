// Where ppbench writes its outputs (`--trace-out`, `--results`), checked before any work starts.
//
//   -                         stdout
//   a character or block device, a FIFO
//                             streamed to as it is (opened for writing, never created, never
//                             replaced): /dev/null, /dev/stdout, a pipe to another program
//   a symlink                 followed, and its target written (never the link replaced)
//   a regular file (or none)  replaced atomically: the content goes to an unnamed O_TMPFILE file
//                             in the target's directory, linked into place only when complete
//                             (linkat through /proc/self/fd, then rename over the target), so a
//                             killed writer leaves no temp file and never a half-written target.
//                             Where the file system has no O_TMPFILE: a named temp file, removed
//                             on every error.
//   a directory               refused
//
// Appending (`--results`, JSON Lines) opens the file with O_APPEND, takes an exclusive flock and
// writes the whole line with one write(), so concurrent writers never lose or interleave records;
// a file that does not end with a newline (a killed writer of old) gets one first.
//
// Errors: a path that cannot be written at all (missing directory, a directory, no permission,
// read-only file system) is a UsageError (exit 2), found by check_output() before the work; a
// write that fails on the way (ENOSPC on /dev/full, EIO, a full disk) is an EnvironmentError
// (exit 3). Neither creates, truncates or replaces anything.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ppbench {

struct OutputTarget {
  enum class Kind { kNone, kStdout, kStream, kFile };
  Kind kind = Kind::kNone;
  std::string flag;      // "--trace-out", for messages
  std::string path;      // as given
  std::string resolved;  // symlinks followed (kFile, kStream)

  bool given() const { return kind != Kind::kNone; }
  bool is_stdout() const { return kind == Kind::kStdout; }
};

// How the target will be written: replace() needs its directory writable (a new file is linked
// there), append() only the file (or the directory when the file does not exist yet).
enum class OutputMode { kReplace, kAppend };

// Checks `path` for `flag` and says how it will be written. Creates, truncates and opens for
// writing nothing that stays behind. UsageError (one line naming the flag and the path) for an
// empty path, a directory, a socket, a missing or unwritable directory, an unwritable file, a
// symlink loop.
OutputTarget check_output(const std::string& flag, const std::string& path, OutputMode mode);

// A file a command reads, named as the user gave it: {"--schedule-file", "s.txt"}.
struct InputFile {
  std::string flag;
  std::string path;
};

// UsageError naming both flags where two of `outputs` are one file (the second written would
// replace the first: a record log replaced by a trace), or an output is a file in `inputs` (the
// run would overwrite what it read). One file however it is spelt: "r", "./r", a symlink to it or
// a hard link. Outputs on stdout or a stream (a device, a FIFO) are not files and are left out;
// so are inputs that are not regular files.
void require_distinct_files(const std::vector<const OutputTarget*>& outputs,
                            const std::vector<InputFile>& inputs);

// Writes `content` as the whole of the target: streamed to stdout or a device/FIFO, or replacing a
// regular file atomically. EnvironmentError when a write fails (the target is then unchanged,
// except a stream, which has what was written).
void write_output(const OutputTarget& target, std::string_view content);

// Appends `line` (without its '\n', which is added) as one record under an exclusive lock.
// EnvironmentError when the write fails; a regular file is then cut back to its old length.
void append_line(const OutputTarget& target, std::string_view line);

// Flushes std::cout and reports a failed write to stdout (a full disk, /dev/full) as an
// EnvironmentError.
void flush_stdout();

}  // namespace ppbench
