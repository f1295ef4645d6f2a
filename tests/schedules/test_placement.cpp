// Placement's parts and copies: which model part a stage runs and which rank holds the other
// copy of it, the facts every optimizer (threads, processes, GPUs) sums gradients by.
#include <gtest/gtest.h>

#include "schedules/placement.h"

namespace ppbench {
namespace {

TEST(Placement, OneChainHoldsOneCopyOfEveryPart) {
  for (const Placement& p :
       {Placement::linear(4, 8), Placement::interleaved(4, 2, 8), Placement::v_shape(4, 8)}) {
    EXPECT_EQ(p.copies_per_part(), 1);
    for (int st = 0; st < p.stages(); ++st) {
      EXPECT_EQ(p.part(st), st) << "stage " << st;
      EXPECT_EQ(p.twin_rank(st), -1) << "stage " << st;
    }
  }
}

TEST(Placement, TwoDirectionsHoldEachPartOnTwoMirroredRanks) {
  const int d = 4;
  const Placement p = Placement::bidirectional(d, 4, 4);
  EXPECT_EQ(p.copies_per_part(), 2);
  for (int j = 0; j < d; ++j) {
    // Down chain: stage j on rank j; up chain: stage D + j on rank D - 1 - j; both run part j.
    EXPECT_EQ(p.part(j), j);
    EXPECT_EQ(p.part(d + j), j);
    EXPECT_EQ(p.twin_rank(j), d - 1 - j) << "stage " << j;
    EXPECT_EQ(p.twin_rank(d + j), j) << "stage " << d + j;
  }
}

TEST(Placement, BothCopiesOnOneRankHaveNoTwin) {
  // Two chains may put both copies of a part on one rank: stages 0 and 2 run part 0 on rank 0,
  // stages 1 and 3 part 1 on rank 1.
  Placement p = Placement::bidirectional(2, 2, 2);
  p.stage_rank = {0, 1, 0, 1};
  for (int st = 0; st < p.stages(); ++st) EXPECT_EQ(p.twin_rank(st), -1) << "stage " << st;
}

}  // namespace
}  // namespace ppbench
