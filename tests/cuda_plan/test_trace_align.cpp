#include <stdexcept>

#include <gtest/gtest.h>

#include "harness/cuda/trace_align.h"

namespace ppbench {
namespace {

TEST(TraceAlign, SkewedStartsShareOneTimeBase) {
  // A steady-clock reading a day after boot; rank 1's start event completed 2.5 ms after rank
  // 0's and rank 2's 1 ms before it.
  const double epoch = 86400.0;
  const std::vector<RankStart> starts{{0, epoch + 0.0010}, {1, epoch + 0.0035}, {2, epoch}};
  const std::vector<GpuComputeTiming> compute{
      {1, 0.0f, 1.0f, Action::single(Op::F, 1, 0)},
      {0, 0.5f, 1.5f, Action::single(Op::F, 0, 0)},
      {0, 2.0f, 3.0f, Action::single(Op::F, 0, 1)},
      {2, 4.0f, 6.0f, Action::single(Op::F, 2, 0)},
  };
  const std::vector<GpuCommTiming> comm{{0, 1, 0, 1.5f, 2.0f, {Op::F, 0, 0}}};
  const Trace t = align_gpu_trace(3, starts, compute, comm);
  EXPECT_EQ(t.source, "cuda");
  EXPECT_EQ(t.time_unit, "s");
  EXPECT_EQ(t.ranks, 3);
  ASSERT_EQ(t.compute.size(), 4u);
  // Grouped by rank, each rank's order kept.
  EXPECT_EQ(t.compute[0].rank, 0);
  EXPECT_EQ(t.compute[0].action, Action::single(Op::F, 0, 0));
  EXPECT_EQ(t.compute[1].action, Action::single(Op::F, 0, 1));
  EXPECT_EQ(t.compute[2].rank, 1);
  EXPECT_EQ(t.compute[3].rank, 2);
  // Zero is rank 2's start; rank 0 is 1 ms later, rank 1 3.5 ms later.
  EXPECT_NEAR(t.compute[0].start, 0.0015, 1e-9);
  EXPECT_NEAR(t.compute[0].end, 0.0025, 1e-9);
  EXPECT_NEAR(t.compute[2].start, 0.0035, 1e-9);
  EXPECT_NEAR(t.compute[2].end, 0.0045, 1e-9);
  EXPECT_NEAR(t.compute[3].start, 0.004, 1e-9);
  ASSERT_EQ(t.comm.size(), 1u);
  EXPECT_NEAR(t.comm[0].start, 0.0025, 1e-9);
  EXPECT_NEAR(t.comm[0].end, 0.003, 1e-9);
  EXPECT_EQ(t.comm[0].src_rank, 0);
  EXPECT_EQ(t.comm[0].dst_rank, 1);
  // The transfer arrives before rank 1 runs F1.0 once both are on the common base.
  EXPECT_LE(t.comm[0].end, t.compute[2].start);
}

TEST(TraceAlign, TransfersUseTheClockOfTheRankThatTimedThem) {
  const std::vector<RankStart> starts{{0, 10.0}, {1, 10.5}};
  const std::vector<GpuCommTiming> comm{{0, 1, 1, 1.0f, 2.0f, {Op::F, 0, 0}},
                                        {1, 0, 0, 1.0f, 2.0f, {Op::B, 1, 0}}};
  const Trace t = align_gpu_trace(2, starts, {}, comm);
  ASSERT_EQ(t.comm.size(), 2u);
  // Sorted by start: the one timed on rank 0 first.
  EXPECT_NEAR(t.comm[0].start, 0.001, 1e-9);
  EXPECT_EQ(t.comm[0].task, (Task{Op::B, 1, 0}));
  EXPECT_NEAR(t.comm[1].start, 0.501, 1e-9);
}

TEST(TraceAlign, RejectsExecutorBugs) {
  const std::vector<RankStart> both{{0, 1.0}, {1, 1.0}};
  EXPECT_THROW(align_gpu_trace(2, {{0, 1.0}}, {}, {}), std::invalid_argument);
  EXPECT_THROW(align_gpu_trace(2, {{0, 1.0}, {0, 2.0}, {1, 1.0}}, {}, {}), std::invalid_argument);
  EXPECT_THROW(align_gpu_trace(2, both, {{2, 0.0f, 1.0f, {}}}, {}), std::invalid_argument);
  EXPECT_THROW(align_gpu_trace(2, both, {{0, 2.0f, 1.0f, {}}}, {}), std::invalid_argument);
  EXPECT_THROW(align_gpu_trace(2, both, {{0, -1.0f, 1.0f, {}}}, {}), std::invalid_argument);
  EXPECT_THROW(align_gpu_trace(2, both, {}, {{0, 1, 3, 0.0f, 1.0f, {}}}), std::invalid_argument);
  EXPECT_NO_THROW(align_gpu_trace(2, both, {{1, 1.0f, 1.0f, {}}}, {}));
}

}  // namespace
}  // namespace ppbench
