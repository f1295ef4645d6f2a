// The executors' shared core where memory runs out at the worst moment: while rank threads are
// being started (some already waiting to be released), and while a failure is being recorded
// (inside a rank thread's catch handler). Neither may hang or end the process.
//
// This binary's operator new can be told to fail from the k-th allocation on, on the calling
// thread only (the rank threads allocate as usual), which is how a machine out of memory looks
// to the code under test.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/executor/executor_core.h"

namespace {

// > 0: the allocation that many from now on this thread fails, and every one after it.
thread_local long fail_from = 0;

}  // namespace

// Every form the library may pair with a plain delete is replaced, so that what one allocates the
// other frees (ASan reports new against free as a mismatch: std::stable_sort's buffer comes from
// the nothrow form). Out of line, so that GCC does not see free() meet a `new` and warn.
[[gnu::noinline]] void* operator new(std::size_t n) {
  if (fail_from > 0 && --fail_from == 0) {
    fail_from = 1;  // stays failing until the test lets go
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](std::size_t n) { return ::operator new(n); }
[[gnu::noinline]] void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (...) {
    return nullptr;
  }
}
[[gnu::noinline]] void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return ::operator new(n, t);
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace ppbench {
namespace {

// Makes this thread's allocations fail from the k-th on, for its lifetime.
class AllocationsFail {
 public:
  explicit AllocationsFail(long k) { fail_from = k; }
  ~AllocationsFail() { fail_from = 0; }
  AllocationsFail(const AllocationsFail&) = delete;
  AllocationsFail& operator=(const AllocationsFail&) = delete;
};

// In a child process: four rank threads started with the k-th allocation of the start failing,
// for every k until the start allocates nothing more. Before the fix, a failure after the first
// thread had started left that thread waiting in the start latch for ranks that never came, and
// the join waited for it forever. Exit code 0: every start either ran every rank or threw
// std::bad_alloc with none run, and more than one allocation point was hit.
[[noreturn]] void start_four_ranks_failing_each_allocation_in_turn() {
  alarm(30);  // a hang kills the child, and the test fails instead of stalling
  constexpr int kRanks = 4;
  int failed = 0;
  for (long k = 1;; ++k) {
    StepErrors errors({});
    std::atomic<int> ran{0};
    bool threw = false;
    {
      const AllocationsFail fail(k);
      try {
        run_rank_threads(kRanks, errors, [&](int) { ++ran; });
      } catch (const std::bad_alloc&) {
        threw = true;
      }
    }
    if (threw && ran != 0) std::_Exit(2);  // a rank ran although the step did not start
    if (!threw) {
      if (ran != kRanks) std::_Exit(3);
      break;  // the k-th allocation came after the start: every point before it was hit
    }
    ++failed;
    if (k > 1000) std::_Exit(4);
  }
  // At least one allocation for each thread: some of them failed after a thread had started.
  std::_Exit(failed >= kRanks ? 0 : 5);
}

TEST(FailingAllocations, StartingTheRanksNeverHangs) {
  EXPECT_EXIT(start_four_ranks_failing_each_allocation_in_turn(), ::testing::ExitedWithCode(0), "");
}

// Recording a failure with no memory left: it is kept (its text in the fixed buffer, cut to
// fit), it aborts the step once, and it does not throw.
TEST(FailingAllocations, AFailureIsRecordedAndAbortsWithNoMemoryLeft) {
  int aborts = 0;
  StepErrors errors([&] { ++aborts; });
  {
    const AllocationsFail fail(1);
    errors.fail(2, std::bad_alloc());
  }
  EXPECT_EQ(aborts, 1);
  try {
    errors.rethrow("step 3: ");
    ADD_FAILURE() << "expected an error";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(std::string(e.what()), "step 3: rank 2: std::bad_alloc");
  }

  errors.clear();
  const std::string watchdog =
      "watchdog: rank 1 waited 60 s at recv(B1.0<-2) " + std::string(StepErrors::kFixedText, 'x');
  {
    const AllocationsFail fail(1);
    errors.fail(StepFailure::kWatchdog, 1, watchdog);
  }
  EXPECT_EQ(aborts, 2);
  try {
    errors.rethrow();
    ADD_FAILURE() << "expected an error";
  } catch (const ExecutionError& e) {
    EXPECT_EQ(e.kind(), StepFailure::kWatchdog);
    EXPECT_EQ(e.rank(), 1);
    EXPECT_EQ(std::string(e.what()), watchdog.substr(0, StepErrors::kFixedText - 1));
  }
}

}  // namespace
}  // namespace ppbench
