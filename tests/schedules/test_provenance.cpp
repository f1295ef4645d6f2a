// The checked-out commit read from a repository's files, in the layouts git writes: a loose
// branch ref, a packed one, a detached HEAD, a linked worktree, and no repository at all.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "harness/provenance.h"

namespace ppbench {
namespace {

namespace fs = std::filesystem;

const std::string kA = "0123456789abcdef0123456789abcdef01234567";
const std::string kB = "fedcba9876543210fedcba9876543210fedcba98";

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

class CheckedOutCommit : public ::testing::Test {
 protected:
  fs::path root =
      fs::temp_directory_path() /
      ("ppbench-provenance-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void SetUp() override { fs::create_directories(root); }
  void TearDown() override { fs::remove_all(root); }
};

TEST_F(CheckedOutCommit, LooseBranchRef) {
  write(root / ".git/HEAD", "ref: refs/heads/main\n");
  write(root / ".git/refs/heads/main", kA + "\n");
  EXPECT_EQ(checked_out_commit(root), kA.substr(0, 12));
}

TEST_F(CheckedOutCommit, PackedBranchRef) {
  write(root / ".git/HEAD", "ref: refs/heads/main\n");
  write(root / ".git/packed-refs", "# pack-refs with: peeled fully-peeled sorted\n" + kB +
                                       " refs/heads/other\n" + kA + " refs/heads/main\n");
  EXPECT_EQ(checked_out_commit(root), kA.substr(0, 12));
}

TEST_F(CheckedOutCommit, DetachedHead) {
  write(root / ".git/HEAD", kB + "\n");
  EXPECT_EQ(checked_out_commit(root), kB.substr(0, 12));
}

TEST_F(CheckedOutCommit, LinkedWorktreeReadsTheCommonRefs) {
  write(root / "main/.git/packed-refs", kB + " refs/heads/feature\n");
  write(root / "main/.git/worktrees/wt/HEAD", "ref: refs/heads/feature\n");
  write(root / "main/.git/worktrees/wt/commondir", "../..\n");
  write(root / "wt/.git", "gitdir: " + (root / "main/.git/worktrees/wt").string() + "\n");
  EXPECT_EQ(checked_out_commit(root / "wt"), kB.substr(0, 12));
}

TEST_F(CheckedOutCommit, NoRepositoryOrNoCommitGivesNothing) {
  EXPECT_EQ(checked_out_commit(root), "");
  write(root / ".git/HEAD", "ref: refs/heads/unborn\n");
  EXPECT_EQ(checked_out_commit(root), "");
}

}  // namespace
}  // namespace ppbench
