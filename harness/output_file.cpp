#include "harness/output_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "core/error.h"

namespace ppbench {

namespace {

std::string describe(const std::string& flag, const std::string& path) {
  return flag.empty() ? quoted(path) : flag + " " + quoted(path);
}

// Problems the user fixes by naming another path are bad input (exit 2); anything else that
// fails while writing (a full disk, an I/O error, too many open files) is the machine (exit 3).
[[noreturn]] void fail(int err, const std::string& what) {
  const std::string message = "cannot write " + what + ": " + std::strerror(err);
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
    case ENOENT:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
    case ENXIO:
    case ETXTBSY:
      throw UsageError(message);
    default:
      throw EnvironmentError(message);
  }
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes now and says whether close() reported an error (errno set).
  bool close_checked() {
    const int fd = fd_;
    fd_ = -1;
    return fd < 0 || ::close(fd) == 0;
  }

 private:
  int fd_;
};

// Writes all of `data`; false with errno set on an error.
bool write_all(int fd, std::string_view data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

struct DirAndName {
  std::string dir, name;
};

DirAndName split(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  if (slash == 0) return {"/", path.substr(1)};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// Follows `path` while it is a symlink (the final component only: the kernel follows the others
// when the file is opened), so the link's target is what gets written, and the link stays.
std::string resolve_symlinks(const std::string& flag, const std::string& path) {
  std::string p = path;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    if (hops == 40) fail(ELOOP, describe(flag, path));
    std::vector<char> buf(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 1);
    ssize_t n;
    while ((n = ::readlink(p.c_str(), buf.data(), buf.size())) >= 0 &&
           static_cast<std::size_t>(n) == buf.size())
      buf.resize(buf.size() * 2);
    if (n < 0) fail(errno, describe(flag, path));
    const std::string target(buf.data(), static_cast<std::size_t>(n));
    if (target.empty()) fail(ENOENT, describe(flag, path));
    p = target.front() == '/' ? target : split(p).dir + "/" + target;
  }
}

// Whether a new file can be made in `dir`, without leaving one there: an O_TMPFILE file that
// vanishes on close, or, where the file system has none, the permission bits.
void require_writable_dir(const std::string& flag, const std::string& path,
                          const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
    if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) == 0) return;
  }
  fail(errno, describe(flag, path) + " (directory " + quoted(dir) + ")");
}

bool is_stream(mode_t mode) { return S_ISCHR(mode) || S_ISBLK(mode) || S_ISFIFO(mode); }

std::string proc_fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// Gives the unnamed file `fd` the name `name` in `dfd`: through /proc/self/fd, or AT_EMPTY_PATH
// where /proc is not mounted. False with errno set.
bool link_tmpfile(int fd, int dfd, const std::string& name) {
  if (::linkat(AT_FDCWD, proc_fd_path(fd).c_str(), dfd, name.c_str(), AT_SYMLINK_FOLLOW) == 0)
    return true;
  if (errno != ENOENT) return false;
  return ::linkat(fd, "", dfd, name.c_str(), AT_EMPTY_PATH) == 0;
}

// Names for a temp file beside `name`: ".name.tmp.<pid>.<k>", shorter where that is too long.
std::string temp_name(const std::string& name, int k) {
  const std::string suffix = ".tmp." + std::to_string(::getpid()) + "." + std::to_string(k);
  if (name.size() + suffix.size() + 1 <= 255) return "." + name + suffix;
  return ".ppbench" + suffix;
}

// The named-temp path for file systems without O_TMPFILE: the temp file is removed on every error.
void replace_with_named_temp(int dfd, const std::string& name, mode_t mode,
                             std::string_view content, const std::string& what) {
  for (int k = 0; k < 1000; ++k) {
    const std::string tmp = temp_name(name, k);
    Fd fd(::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, mode));
    if (!fd.ok()) {
      if (errno == EEXIST) continue;
      fail(errno, what);
    }
    int err = 0;
    if (!write_all(fd.get(), content) || ::fsync(fd.get()) != 0 || !fd.close_checked()) err = errno;
    if (err == 0 && ::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) err = errno;
    if (err != 0) {
      fd.reset();
      ::unlinkat(dfd, tmp.c_str(), 0);
      fail(err, what);
    }
    return;
  }
  fail(EEXIST, what);
}

void replace_file(const std::string& path, std::string_view content, const std::string& what) {
  const DirAndName dn = split(path);
  Fd dfd(::open(dn.dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dfd.ok()) fail(errno, what);
  struct stat old {};
  const bool exists = ::fstatat(dfd.get(), dn.name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists && S_ISDIR(old.st_mode)) fail(EISDIR, what);
  // A replaced file keeps its permission bits; a new one gets 0666 less the umask.
  const mode_t mode = exists && S_ISREG(old.st_mode) ? (old.st_mode & 07777) : 0666;

  Fd fd(::openat(dfd.get(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666));
  if (!fd.ok()) {
    if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)
      return replace_with_named_temp(dfd.get(), dn.name, mode, content, what);
    fail(errno, what);
  }
  if (!write_all(fd.get(), content)) fail(errno, what);  // the unnamed file vanishes with fd
  if (exists && S_ISREG(old.st_mode)) ::fchmod(fd.get(), mode);
  if (::fsync(fd.get()) != 0) fail(errno, what);

  // Complete: give it its name. A new target is linked in directly; an existing one is replaced
  // by renaming a linked temp name over it (link() cannot replace).
  if (!exists) {
    if (link_tmpfile(fd.get(), dfd.get(), dn.name)) return;
    if (errno != EEXIST) {
      if (errno == EPERM || errno == ENOENT)  // no /proc and no CAP_DAC_READ_SEARCH
        return replace_with_named_temp(dfd.get(), dn.name, mode, content, what);
      fail(errno, what);
    }
  }
  for (int k = 0; k < 1000; ++k) {
    const std::string tmp = temp_name(dn.name, k);
    if (!link_tmpfile(fd.get(), dfd.get(), tmp)) {
      if (errno == EEXIST) continue;
      if (errno == EPERM || errno == ENOENT)
        return replace_with_named_temp(dfd.get(), dn.name, mode, content, what);
      fail(errno, what);
    }
    if (::renameat(dfd.get(), tmp.c_str(), dfd.get(), dn.name.c_str()) != 0) {
      const int err = errno;
      ::unlinkat(dfd.get(), tmp.c_str(), 0);
      fail(err, what);
    }
    // Make the rename durable too (best effort: a directory opened read-only may be refused).
    Fd dir(::open(dn.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.ok()) ::fsync(dir.get());
    return;
  }
  fail(EEXIST, what);
}

// A device or FIFO: opened for writing only (a FIFO then waits for its reader), never created.
void write_stream(const std::string& path, std::string_view content, const std::string& what) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.ok()) fail(errno, what);
  if (!write_all(fd.get(), content) || !fd.close_checked()) fail(errno, what);
}

// An exclusive lock on the whole file, for the time `fd` is open.
void lock(int fd, const std::string& what) {
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) fail(errno, what);
  }
}

void append_to_file(const std::string& path, std::string_view line, const std::string& what) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Read access too, to see whether the file ends with a newline; a file we may only write
    // is appended to without that check.
    bool readable = true;
    Fd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666));
    if (!fd.ok() && errno == EACCES) {
      readable = false;
      fd.reset(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666));
    }
    if (!fd.ok()) fail(errno, what);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) fail(errno, what);
    std::string record;
    record.reserve(line.size() + 2);
    if (!S_ISREG(st.st_mode)) {  // became a device or FIFO since the check: stream to it
      record.append(line).push_back('\n');
      if (!write_all(fd.get(), record)) fail(errno, what);
      return;
    }
    lock(fd.get(), what);
    // Another program may have renamed a new file over the path between open and lock; then
    // this inode is no longer the file, and the record must go to the new one.
    struct stat now {};
    if (::stat(path.c_str(), &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev)
      continue;
    if (::fstat(fd.get(), &st) != 0) fail(errno, what);
    const off_t old_size = st.st_size;
    if (old_size > 0 && readable) {
      char last = '\n';
      if (::pread(fd.get(), &last, 1, old_size - 1) == 1 && last != '\n') record.push_back('\n');
    }
    record.append(line).push_back('\n');
    if (!write_all(fd.get(), record) || ::fsync(fd.get()) != 0) {
      const int err = errno;
      // Never leave half a record: cut the file back to what it was (we still hold the lock).
      [[maybe_unused]] const int cut = ::ftruncate(fd.get(), old_size);
      fail(err, what);
    }
    return;
  }
  fail(EAGAIN, what);
}

}  // namespace

namespace {

// One key per file: its device and inode where it exists (hard links and symlinks meet there),
// else its absolute path with "." and ".." resolved (two outputs not yet written).
std::string file_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    return "inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  // Absolute first: weakly_canonical leaves a relative path relative where none of it exists,
  // and "q" and "./q" would then differ.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) return "path " + std::filesystem::path(path).lexically_normal().string();
  const std::filesystem::path p = std::filesystem::weakly_canonical(absolute, ec);
  return "path " + (ec ? absolute.lexically_normal() : p).string();
}

}  // namespace

void require_distinct_files(const std::vector<const OutputTarget*>& outputs,
                            const std::vector<InputFile>& inputs) {
  struct Seen {
    std::string flag, path, key;
    bool input;
  };
  std::vector<Seen> seen;
  for (const InputFile& in : inputs) {
    struct stat st {};
    if (!in.path.empty() && ::stat(in.path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      seen.push_back({in.flag, in.path, file_key(in.path), true});
  }
  for (const OutputTarget* out : outputs) {
    if (out == nullptr || out->kind != OutputTarget::Kind::kFile) continue;
    const std::string key = file_key(out->resolved);
    for (const Seen& s : seen)
      if (s.key == key)
        throw UsageError(out->flag + " " + quoted(out->path) + " is the same file as " + s.flag +
                         " " + quoted(s.path) +
                         (s.input ? ", which this run reads: writing it would destroy it"
                                  : ": one would replace the other") +
                         " (give each output a file of its own)");
    seen.push_back({out->flag, out->path, key, false});
  }
}

OutputTarget check_output(const std::string& flag, const std::string& path, OutputMode mode) {
  OutputTarget t;
  t.flag = flag;
  t.path = path;
  if (path.empty())
    throw UsageError(flag + " '' is empty: give a file name, a device, a FIFO, or - for stdout");
  if (path == "-") {
    t.kind = OutputTarget::Kind::kStdout;
    return t;
  }
  const std::string what = describe(flag, path);
  t.resolved = resolve_symlinks(flag, path);
  struct stat st {};
  if (::stat(t.resolved.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw UsageError(
          what + " is a directory: give a file name in it, a device, a FIFO, or - for stdout");
    if (S_ISSOCK(st.st_mode))
      throw UsageError(what + " is a socket: give a file name, a device, a FIFO, or - for stdout");
    if (::faccessat(AT_FDCWD, t.resolved.c_str(), W_OK, AT_EACCESS) != 0) fail(errno, what);
    if (is_stream(st.st_mode)) {
      t.kind = OutputTarget::Kind::kStream;
      return t;
    }
    // A kernel file (/proc, /sys) may be opened for writing by root and then refuse the write
    // after the run: never a place for a record or a trace.
    struct statfs fs {};
    if (::statfs(t.resolved.c_str(), &fs) == 0 &&
        (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC || fs.f_type == DEBUGFS_MAGIC ||
         fs.f_type == CGROUP2_SUPER_MAGIC))
      throw UsageError(
          what +
          " is a kernel file (/proc, /sys): give a file name, a device, a FIFO, or - for stdout");
    // Opening for writing changes nothing (no O_TRUNC, no O_CREAT) but finds a read-only file
    // system or a file in use as a program.
    Fd fd(::open(t.resolved.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (!fd.ok()) fail(errno, what);
    if (mode == OutputMode::kReplace) require_writable_dir(flag, path, split(t.resolved).dir);
    t.kind = OutputTarget::Kind::kFile;
    return t;
  }
  if (errno != ENOENT) fail(errno, what);
  const DirAndName dn = split(t.resolved);
  if (dn.name.empty() || dn.name == "." || dn.name == "..")
    throw UsageError(what +
                     " is not a file name: give a file name, a device, a FIFO, or - for stdout");
  struct stat dst {};
  if (::stat(dn.dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode))
    throw UsageError("cannot write " + what + ": directory " + quoted(dn.dir) + " does not exist");
  require_writable_dir(flag, path, dn.dir);
  t.kind = OutputTarget::Kind::kFile;
  return t;
}

void flush_stdout() {
  // A write that already failed (a printer that flushed, such as --help's) left its reason in
  // errno; keep it, as the flush below then has nothing left to fail on.
  const int earlier = !std::cout ? errno : 0;
  errno = 0;
  std::cout.flush();
  const bool bad = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (bad) {
    const int err = errno != 0 ? errno : earlier;
    std::cout.clear();
    std::clearerr(stdout);
    throw EnvironmentError(std::string("cannot write to stdout: ") +
                           (err != 0 ? std::strerror(err) : "write error"));
  }
}

void write_output(const OutputTarget& target, std::string_view content) {
  const std::string what = describe(target.flag, target.path);
  switch (target.kind) {
    case OutputTarget::Kind::kNone:
      return;
    case OutputTarget::Kind::kStdout:
      flush_stdout();
      if (!write_all(STDOUT_FILENO, content)) fail(errno, what);
      return;
    case OutputTarget::Kind::kStream:
      write_stream(target.resolved, content, what);
      return;
    case OutputTarget::Kind::kFile:
      replace_file(target.resolved, content, what);
      return;
  }
}

void append_line(const OutputTarget& target, std::string_view line) {
  const std::string what = describe(target.flag, target.path);
  switch (target.kind) {
    case OutputTarget::Kind::kNone:
      return;
    case OutputTarget::Kind::kStdout: {
      flush_stdout();
      std::string record(line);
      record.push_back('\n');
      struct stat st {};
      if (::fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode)) lock(STDOUT_FILENO, what);
      const bool ok = write_all(STDOUT_FILENO, record);
      const int err = errno;
      if (S_ISREG(st.st_mode)) ::flock(STDOUT_FILENO, LOCK_UN);
      if (!ok) fail(err, what);
      return;
    }
    case OutputTarget::Kind::kStream:
      write_stream(target.resolved, std::string(line) + "\n", what);
      return;
    case OutputTarget::Kind::kFile:
      append_to_file(target.resolved, line, what);
      return;
  }
}

}  // namespace ppbench
