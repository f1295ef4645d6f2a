// Outputs (harness/output_file.h): devices, FIFOs and stdout are streamed to and never replaced,
// symlinks are followed, directories refused, regular files replaced atomically with no temp file
// left behind, and JSON Lines appended under a lock with a newline where a killed writer left none.
// Also the quoting of echoed user input (core/error.h) and the cost flags' numbers.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cost_model.h"
#include "harness/output_file.h"

namespace ppbench {
namespace {

namespace fs = std::filesystem;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ppbench-output-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Every entry of the directory, sorted: a temp file left behind shows up here.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

TEST_F(OutputFileTest, RegularFileIsReplacedAtomicallyWithoutTempFiles) {
  const std::string p = path("trace.json");
  write_output(check_output("--trace-out", p, OutputMode::kReplace), "first\n");
  EXPECT_EQ(read(p), "first\n");
  ::chmod(p.c_str(), 0640);
  struct stat before {};
  ::stat(p.c_str(), &before);
  write_output(check_output("--trace-out", p, OutputMode::kReplace), "second\n");
  EXPECT_EQ(read(p), "second\n");
  struct stat after {};
  ::stat(p.c_str(), &after);
  EXPECT_NE(before.st_ino, after.st_ino);   // replaced by a new file, not rewritten in place
  EXPECT_EQ(after.st_mode & 07777, 0640u);  // and it keeps its permission bits
  EXPECT_EQ(entries(), std::vector<std::string>{"trace.json"});
}

TEST_F(OutputFileTest, DirectoryIsRefusedWithAClearMessage) {
  try {
    check_output("--trace-out", dir_.string(), OutputMode::kReplace);
    FAIL() << "a directory was accepted";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("is a directory"), std::string::npos) << m;
    EXPECT_EQ(m.find("Success"), std::string::npos) << m;
  }
  EXPECT_THROW(check_output("--trace-out", path("missing/t.json"), OutputMode::kReplace),
               UsageError);
  EXPECT_THROW(check_output("--trace-out", "", OutputMode::kReplace), UsageError);
  EXPECT_TRUE(entries().empty());
}

TEST_F(OutputFileTest, SymlinkIsFollowedNotReplaced) {
  const std::string target = path("target.json"), link = path("link.json");
  { std::ofstream(target) << "old\n"; }
  fs::create_symlink("target.json", link);
  write_output(check_output("--trace-out", link, OutputMode::kReplace), "new\n");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read(target), "new\n");
  // A dangling link gets its target created.
  const std::string dangling = path("dangling.json");
  fs::create_symlink("created.json", dangling);
  write_output(check_output("--trace-out", dangling, OutputMode::kReplace), "made\n");
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(read(path("created.json")), "made\n");
  append_line(check_output("--results", link, OutputMode::kAppend), "{\"a\":1}");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read(target), "new\n{\"a\":1}\n");
}

TEST_F(OutputFileTest, DevNullIsWrittenNotReplaced) {
  const OutputTarget t = check_output("--trace-out", "/dev/null", OutputMode::kReplace);
  EXPECT_EQ(t.kind, OutputTarget::Kind::kStream);
  write_output(t, "anything\n");
  append_line(check_output("--results", "/dev/null", OutputMode::kAppend), "{}");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A link to it is followed to the device.
  const std::string link = path("null-link");
  fs::create_symlink("/dev/null", link);
  write_output(check_output("--trace-out", link, OutputMode::kReplace), "x");
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST_F(OutputFileTest, DevFullIsAnEnvironmentErrorAndStaysADevice) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full";
  const OutputTarget t = check_output("--trace-out", "/dev/full", OutputMode::kReplace);
  try {
    write_output(t, "a trace\n");
    FAIL() << "a write to /dev/full succeeded";
  } catch (const EnvironmentError& e) {
    EXPECT_NE(std::string(e.what()).find("No space left"), std::string::npos) << e.what();
  }
  EXPECT_THROW(append_line(check_output("--results", "/dev/full", OutputMode::kAppend), "{}"),
               EnvironmentError);
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(OutputFileTest, FifoIsStreamedTo) {
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read(fifo); });
  write_output(check_output("--trace-out", fifo, OutputMode::kReplace), "through the pipe\n");
  reader.join();
  EXPECT_EQ(got, "through the pipe\n");
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(OutputFileTest, AppendStartsOnANewLineAfterAKilledWriter) {
  const std::string p = path("runs.jsonl");
  { std::ofstream(p) << "{\"complete\":1}\n{\"cut\":"; }
  struct stat before {};
  ::stat(p.c_str(), &before);
  append_line(check_output("--results", p, OutputMode::kAppend), "{\"b\":2}");
  append_line(check_output("--results", p, OutputMode::kAppend), "{\"c\":3}");
  EXPECT_EQ(read(p), "{\"complete\":1}\n{\"cut\":\n{\"b\":2}\n{\"c\":3}\n");
  struct stat after {};
  ::stat(p.c_str(), &after);
  EXPECT_EQ(before.st_ino, after.st_ino);  // appended in place, never rewritten
  EXPECT_EQ(entries(), std::vector<std::string>{"runs.jsonl"});
}

TEST_F(OutputFileTest, ConcurrentAppendsLoseNothing) {
  const std::string p = path("runs.jsonl");
  constexpr int kProcs = 8, kLines = 200;
  std::vector<pid_t> kids;
  for (int k = 0; k < kProcs; ++k) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        const OutputTarget t = check_output("--results", p, OutputMode::kAppend);
        const std::string line = "{\"writer\":" + std::to_string(k) + ",\"pad\":\"" +
                                 std::string(5000, 'x') + "\"}";  // longer than PIPE_BUF
        for (int i = 0; i < kLines; ++i) append_line(t, line);
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::ifstream in(p);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(line.size(), std::string("{\"writer\":0,\"pad\":\"\"}").size() + 5000) << lines;
  }
  EXPECT_EQ(lines, kProcs * kLines);
}

TEST_F(OutputFileTest, ReadOnlyTargetsAreRefusedUpFrontWithoutCreatingAnything) {
  const std::string ro = path("ro");
  fs::create_directory(ro);
  { std::ofstream(ro + "/existing.json") << "keep\n"; }
  ::chmod((ro + "/existing.json").c_str(), 0666);
  ::chmod(dir_.c_str(), 0755);
  ::chmod(ro.c_str(), 0555);
  // Root may write anywhere: check as nobody in a child process.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(77);
    int failures = 0;
    auto refused = [&](const char* flag, const std::string& p, OutputMode mode) {
      try {
        check_output(flag, p, mode);
        ++failures;
      } catch (const UsageError&) {
      }
    };
    refused("--trace-out", ro + "/t.json", OutputMode::kReplace);
    refused("--results", ro + "/r.jsonl", OutputMode::kAppend);
    refused("--trace-out", ro + "/existing.json", OutputMode::kReplace);  // needs the directory
    // Appending to a writable file needs only the file.
    try {
      append_line(check_output("--results", ro + "/existing.json", OutputMode::kAppend), "{}");
    } catch (...) {
      ++failures;
    }
    ::_exit(failures);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::chmod(ro.c_str(), 0755);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot drop root";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(ro)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"existing.json"});
  EXPECT_EQ(read(ro + "/existing.json"), "keep\n{}\n");
}

TEST(Quoted, EscapesControlCharactersAndTerminalSequences) {
  EXPECT_EQ(quoted("1f1b"), "'1f1b'");
  EXPECT_EQ(quoted("a\nb"), "'a\\nb'");
  EXPECT_EQ(quoted("\x1b[31mred"), "'\\x1b[31mred'");
  EXPECT_EQ(quoted(std::string("nul\0x", 5)), "'nul\\x00x'");
  EXPECT_EQ(quoted("it's \\"), "'it\\'s \\\\'");
  EXPECT_EQ(quoted("\xc2\x9b"
                   "2J"),
            "'\\xc2\\x9b2J'");                        // C1 CSI in UTF-8
  EXPECT_EQ(quoted("\xff"), "'\\xff'");               // not UTF-8
  EXPECT_EQ(quoted("caf\xc3\xa9"), "'caf\xc3\xa9'");  // printable UTF-8 stays
  const std::string longer(1000, 'x');
  EXPECT_NE(quoted(longer).find("(1000 bytes)"), std::string::npos);
  EXPECT_LT(quoted(longer).size(), 300u);
}

TEST(CostSpec, RefusesNonFiniteHugeRepeatedAndInconsistentCosts) {
  EXPECT_THROW(parse_cost_spec("F=1e308"), UsageError);
  EXPECT_THROW(parse_cost_spec("F=1e400"), UsageError);
  EXPECT_THROW(parse_cost_spec("F=nan"), UsageError);
  EXPECT_THROW(parse_cost_spec("F=inf"), UsageError);
  EXPECT_THROW(parse_cost_spec("F=0"), UsageError);
  EXPECT_THROW(parse_cost_spec("F=-1"), UsageError);
  EXPECT_THROW(parse_cost_spec("F=1,F=2"), UsageError);
  EXPECT_THROW(parse_cost_spec("B=1,B=1"), UsageError);
  EXPECT_THROW(resolve(parse_cost_spec("B=2,I=1,W=5"), 0), UsageError);
  EXPECT_THROW(resolve(parse_cost_spec("B=2,I=2"), 0), UsageError);  // W would be 0
  EXPECT_NO_THROW(resolve(parse_cost_spec("B=3,I=1,W=2"), 0));
  EXPECT_NO_THROW(resolve(parse_cost_spec("B=0.3,I=0.1,W=0.2"), 0));  // equal to a relative 1e-9
  EXPECT_NO_THROW(parse_cost_spec("F=1e12,B=1e12"));
  try {
    parse_cost_spec("F=1,F=2");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ppbench
