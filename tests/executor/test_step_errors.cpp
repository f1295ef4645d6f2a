// How a step's first failure leaves the executors: a rank that ran out of memory (the host's
// std::bad_alloc, a device's ppbench::OutOfMemory) ends the run as the machine's limit, one
// whose machine failed under it (an MPI or NCCL call) as the machine's problem (both exit code
// 3), anything else as a failed step (exit code 1) naming the rank.
#include <new>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/executor/executor_core.h"

namespace ppbench {
namespace {

// Rank `failing` of three throws `thrown`; the others return at once.
template <class Thrown>
void step_where_one_rank_throws(StepErrors& errors, int failing, const Thrown& thrown) {
  run_rank_threads(3, errors, [&](int r) {
    if (r == failing) throw thrown;
  });
}

TEST(StepErrors, HostMemoryRunningOutIsTheMachinesLimit) {
  StepErrors errors({});
  step_where_one_rank_throws(errors, 1, std::bad_alloc());
  try {
    errors.rethrow("step 2: ");
    ADD_FAILURE() << "expected an error";
  } catch (const ExecutionError& e) {
    ADD_FAILURE() << "a failed step, not the machine's limit: " << e.what();
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(std::string(e.what()).rfind("step 2: rank 1: ", 0), 0u) << e.what();
  }
}

TEST(StepErrors, DeviceMemoryRunningOutIsTheMachinesLimit) {
  StepErrors errors({});
  step_where_one_rank_throws(errors, 2, OutOfMemory("arena 'rank 2': out of device memory"));
  try {
    errors.rethrow();
    ADD_FAILURE() << "expected an error";
  } catch (const OutOfMemory& e) {
    EXPECT_STREQ(e.what(), "rank 2: arena 'rank 2': out of device memory");
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not the machine's memory limit: " << e.what();
  }
}

TEST(StepErrors, TheMachineFailingUnderARankIsTheMachinesProblem) {
  StepErrors errors({});
  step_where_one_rank_throws(errors, 1, EnvironmentError("MPI: MPI_Issend: MPI_ERR_TRUNCATE"));
  try {
    errors.rethrow("step 1: ");
    ADD_FAILURE() << "expected an error";
  } catch (const ExecutionError& e) {
    ADD_FAILURE() << "a failed step, not the machine's problem: " << e.what();
  } catch (const OutOfMemory& e) {
    ADD_FAILURE() << "not a memory limit: " << e.what();
  } catch (const EnvironmentError& e) {
    EXPECT_STREQ(e.what(), "step 1: rank 1: MPI: MPI_Issend: MPI_ERR_TRUNCATE");
  }
}

TEST(StepErrors, AnyOtherFailureIsAFailedStepNamingItsRank) {
  StepErrors errors({});
  step_where_one_rank_throws(errors, 0, std::runtime_error("cuBLAS failed"));
  try {
    errors.rethrow();
    ADD_FAILURE() << "expected an error";
  } catch (const ExecutionError& e) {
    EXPECT_EQ(e.kind(), StepFailure::kWork);
    EXPECT_EQ(e.rank(), 0);
    EXPECT_STREQ(e.what(), "rank 0: cuBLAS failed");
  }
}

TEST(StepErrors, TheFirstFailureDecidesAndAbortsOnce) {
  int aborts = 0;
  StepErrors errors([&] { ++aborts; });
  errors.fail(StepFailure::kWatchdog, 1, "watchdog: rank 1 waited");
  errors.fail(2, std::bad_alloc());  // a consequence of the first: neither kept nor aborting
  EXPECT_EQ(aborts, 1);
  EXPECT_THROW(errors.rethrow(), ExecutionError);
  errors.clear();
  EXPECT_NO_THROW(errors.rethrow());
}

}  // namespace
}  // namespace ppbench
