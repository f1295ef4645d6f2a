#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "core/heap_prefault.h"

namespace ppbench {
namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// What simulate relies on: after the prefault, the allocations that follow land on pages already
// mapped, so filling them takes (almost) no page faults, where 4 MiB would otherwise take 1024.
TEST(HeapPrefault, LaterAllocationsTouchNoFreshPages) {
  constexpr std::size_t kBytes = std::size_t{8} << 20, kUsed = std::size_t{4} << 20;
  if (!prefault_heap(kBytes)) GTEST_SKIP() << "no MADV_POPULATE_WRITE here (glibc, Linux 5.14)";
  const long before = minor_faults();
  // Several blocks, as the schedule's per-rank orders are.
  char* blocks[8];
  for (char*& b : blocks) {
    b = static_cast<char*>(std::malloc(kUsed / 8));
    ASSERT_NE(b, nullptr);
    std::memset(b, 1, kUsed / 8);
  }
  const long faults = minor_faults() - before;
  for (char* b : blocks) std::free(b);
  EXPECT_LT(faults, 32) << "of the " << kUsed / 4096 << " pages filled";
}

TEST(HeapPrefault, SmallRequestsAreLeftToFault) { EXPECT_FALSE(prefault_heap(4096)); }

}  // namespace
}  // namespace ppbench
