// Data parallelism on paper (harness/allreduce_cost.h): the ring all-reduce time, where the
// all-reduces of R replicas land on small simulated steps (times worked out by hand in the
// comments), and how collectives enter the metrics.
#include <algorithm>

#include <gtest/gtest.h>

#include "harness/allreduce_cost.h"
#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::simulate_uniform;
using testing::stage_cost;

TEST(RingAllReduce, MatchesHandComputedTimes) {
  // 1 GB over 10 GB/s with 10 us per step: R=2 is 2 steps of half the buffer each.
  const RingLink nic{1e10, 1e-5};
  EXPECT_DOUBLE_EQ(ring_allreduce_time(1e9, 2, nic), 2 * 1e-5 + 0.1);
  // R=4: 6 steps of a quarter: 6e-5 + 1.5 x 0.1.
  EXPECT_NEAR(ring_allreduce_time(1e9, 4, nic), 6e-5 + 0.15, 1e-15);
  // R=8, 8 bytes at 1 byte per unit, 0.5 per step: 14 x 0.5 + 14/8 x 8 = 21.
  EXPECT_DOUBLE_EQ(ring_allreduce_time(8, 8, {1, 0.5}), 21);
  // One replica reduces nothing, whatever the latency.
  EXPECT_EQ(ring_allreduce_time(1e9, 1, nic), 0);
  // Large R: the volume term tends to twice bytes / bandwidth.
  EXPECT_NEAR(ring_allreduce_time(1, 65536, {1, 0}), 2.0 * 65535 / 65536, 1e-15);
}

DataParallel dp_of(int replicas, bool overlap, std::vector<double> bytes, RingLink link = {1, 0}) {
  DataParallel dp;
  dp.replicas = replicas;
  dp.overlap = overlap;
  dp.link = link;
  dp.stage_bytes = std::move(bytes);
  return dp;
}

TEST(DataParallel, EndOfStepOneFOneB) {
  // 1F1B, D=2, N=2, F=1, B=2:
  //   rank 0: F0.0 [0,1] F0.1 [1,2] B0.0 [4,6] B0.1 [7,9]
  //   rank 1: F1.0 [1,2] B1.0 [2,4] F1.1 [4,5] B1.1 [5,7]
  // R=2, 4 bytes per stage at 1 byte per unit and 0.5 per step: T = 2 x 0.5 + 1 x 4 = 5, after
  // each rank's last action: rank 0 [9,14], rank 1 [7,12].
  auto r = simulate_uniform({"1f1b", 2, 2}, stage_cost(1, 1, 1));
  add_allreduces(r.trace, r.schedule, dp_of(2, false, {4, 4}, {1, 0.5}));
  ASSERT_EQ(r.trace.collectives.size(), 2u);
  const auto& c = r.trace.collectives;
  EXPECT_EQ(c[0].rank, 0);
  EXPECT_EQ(c[0].stage, -1);
  EXPECT_DOUBLE_EQ(c[0].start, 9);
  EXPECT_DOUBLE_EQ(c[0].end, 14);
  EXPECT_DOUBLE_EQ(c[0].bytes, 4);
  EXPECT_EQ(c[1].rank, 1);
  EXPECT_DOUBLE_EQ(c[1].start, 7);
  EXPECT_DOUBLE_EQ(c[1].end, 12);

  const Metrics m = compute_metrics(r.trace, r.schedule.placement);
  EXPECT_DOUBLE_EQ(m.makespan, 14);
  EXPECT_DOUBLE_EQ(m.ranks[0].busy, 6);  // compute only
  EXPECT_DOUBLE_EQ(m.ranks[0].idle, 8);
  EXPECT_DOUBLE_EQ(m.bubble_fraction, 16.0 / 28);
  EXPECT_DOUBLE_EQ(m.bubble_ratio, 16.0 / 12);
  EXPECT_DOUBLE_EQ(m.ranks[0].compute_end, 9);
  EXPECT_DOUBLE_EQ(m.ranks[0].last_end, 14);
  EXPECT_DOUBLE_EQ(m.ranks[1].span_idle, (12 - 1) - 6);
  EXPECT_DOUBLE_EQ(m.ranks[1].exposed_allreduce, 5);
  EXPECT_DOUBLE_EQ(m.allreduce_time, 5);
  EXPECT_DOUBLE_EQ(m.allreduce_bytes, 4);
  EXPECT_EQ(m.collectives, 2);
}

// The updates read the summed gradients: each moves after its all-reduce, one at a time per rank,
// keeping its length (the layout of EndOfStepOneFOneB, an update of 0.5 after each stage's B).
TEST(DataParallel, UpdatesFollowTheirAllReduce) {
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlapped" : "after the step");
    auto r = simulate_uniform({"1f1b", 2, 2}, stage_cost(1, 1, 1));
    r.trace.updates = {{0, 9, 9.5, 0}, {1, 7, 7.5, 1}};
    add_allreduces(r.trace, r.schedule, dp_of(2, overlap, {4, 4}, {1, 0.5}));
    // Both modes: rank 0's all-reduce [9,14], rank 1's [7,12] (stage = rank here).
    ASSERT_EQ(r.trace.updates.size(), 2u);
    EXPECT_DOUBLE_EQ(r.trace.updates[0].start, 14);
    EXPECT_DOUBLE_EQ(r.trace.updates[0].end, 14.5);
    EXPECT_DOUBLE_EQ(r.trace.updates[1].start, 12);
    EXPECT_DOUBLE_EQ(r.trace.updates[1].end, 12.5);
    EXPECT_DOUBLE_EQ(compute_metrics(r.trace, r.schedule.placement).makespan, 14.5);
  }
}

TEST(DataParallel, OneReplicaAddsNothing) {
  auto r = simulate_uniform({"1f1b", 2, 2}, stage_cost(1, 1, 1));
  add_allreduces(r.trace, r.schedule, dp_of(1, false, {4, 4}, {1, 0.5}));
  EXPECT_TRUE(r.trace.collectives.empty());
  EXPECT_DOUBLE_EQ(compute_metrics(r.trace, r.schedule.placement).makespan, 9);
}

TEST(DataParallel, OverlappedInterleavedStartsEachStageAfterItsLastBackward) {
  // Interleaved 1F1B, D=2, v=2, N=2, F=1, B=2 (stages 0, 2 on rank 0; 1, 3 on rank 1):
  //   rank 0: F0.0 [0,1] F0.1 [1,2] F2.0 [2,3] F2.1 [3,4] B2.0 [6,8] B2.1 [9,11] B0.0 [11,13]
  //           B0.1 [13,15]
  //   rank 1: F1.0 [1,2] F1.1 [2,3] F3.0 [3,4] B3.0 [4,6] F3.1 [6,7] B3.1 [7,9] B1.0 [9,11]
  //           B1.1 [11,13]
  // Last backwards: stage 3 at 9, stage 2 at 11, stage 1 at 13, stage 0 at 15.
  auto r = simulate_uniform({"interleaved-1f1b", 2, 2, 2}, stage_cost(1, 1, 1));
  Trace t = r.trace;
  // T = 2 (R-1)/R x 2 = 2: each all-reduce fits before the rank's next one is ready.
  add_allreduces(t, r.schedule, dp_of(2, true, {2, 2, 2, 2}));
  ASSERT_EQ(t.collectives.size(), 4u);
  auto find = [&](int stage) {
    return *std::find_if(t.collectives.begin(), t.collectives.end(),
                         [&](const CollectiveEvent& c) { return c.stage == stage; });
  };
  EXPECT_EQ(find(2).rank, 0);
  EXPECT_DOUBLE_EQ(find(2).start, 11);
  EXPECT_DOUBLE_EQ(find(0).start, 15);
  EXPECT_DOUBLE_EQ(find(0).end, 17);
  EXPECT_DOUBLE_EQ(find(3).start, 9);
  EXPECT_DOUBLE_EQ(find(1).start, 13);
  Metrics m = compute_metrics(t, r.schedule.placement);
  EXPECT_DOUBLE_EQ(m.makespan, 17);
  EXPECT_DOUBLE_EQ(m.ranks[0].allreduce_time, 4);
  EXPECT_DOUBLE_EQ(m.ranks[0].exposed_allreduce, 2);  // stage 2's hides behind B0.0, B0.1
  EXPECT_DOUBLE_EQ(m.ranks[1].exposed_allreduce, 2);

  // T = 6: a rank's all-reduces queue. Rank 0: stage 2 [11,17], stage 0 waits to [17,23];
  // rank 1: stage 3 [9,15], stage 1 [15,21]. Exposed: 23 - 15 and 21 - 13.
  t = r.trace;
  add_allreduces(t, r.schedule, dp_of(2, true, {6, 6, 6, 6}));
  EXPECT_DOUBLE_EQ(find(2).end, 17);
  EXPECT_DOUBLE_EQ(find(0).start, 17);
  EXPECT_DOUBLE_EQ(find(0).end, 23);
  EXPECT_DOUBLE_EQ(find(3).end, 15);
  EXPECT_DOUBLE_EQ(find(1).start, 15);
  m = compute_metrics(t, r.schedule.placement);
  EXPECT_DOUBLE_EQ(m.makespan, 23);
  EXPECT_DOUBLE_EQ(m.ranks[0].exposed_allreduce, 8);
  EXPECT_DOUBLE_EQ(m.ranks[1].exposed_allreduce, 8);
  EXPECT_DOUBLE_EQ(m.exposed_allreduce, 8);

  // At the end of the step instead: 4 units per rank, T = 4, rank 0 [15,19], rank 1 [13,17].
  t = r.trace;
  add_allreduces(t, r.schedule, dp_of(2, false, {2, 2, 2, 2}));
  ASSERT_EQ(t.collectives.size(), 2u);
  EXPECT_DOUBLE_EQ(t.collectives[0].start, 15);
  EXPECT_DOUBLE_EQ(t.collectives[0].end, 19);
  EXPECT_DOUBLE_EQ(t.collectives[0].bytes, 4);
  EXPECT_DOUBLE_EQ(t.collectives[1].end, 17);
}

TEST(DataParallel, SplitBackwardWaitsForTheLastW) {
  // ZB-H1, D=2, N=2, F=I=W=1:
  //   rank 0: F0.0 [0,1] F0.1 [1,2] I0.0 [3,4] W0.0 [4,5] I0.1 [5,6] W0.1 [6,7]
  //   rank 1: F1.0 [1,2] I1.0 [2,3] F1.1 [3,4] I1.1 [4,5] W1.0 [5,6] W1.1 [6,7]
  // Stage 1's last I ends at 5, its last W at 7: the gradients are final at 7.
  auto r = simulate_uniform({"zb-h1", 2, 2}, stage_cost(1, 1, 1));
  add_allreduces(r.trace, r.schedule, dp_of(2, true, {2, 2}));
  ASSERT_EQ(r.trace.collectives.size(), 2u);
  for (const auto& c : r.trace.collectives) {
    EXPECT_DOUBLE_EQ(c.start, 7) << c.stage;
    EXPECT_DOUBLE_EQ(c.end, 9) << c.stage;
  }
}

TEST(DataParallel, RefusesAByteCountPerStageOfTheWrongLength) {
  auto r = simulate_uniform({"1f1b", 2, 2}, stage_cost(1, 1, 1));
  EXPECT_THROW(add_allreduces(r.trace, r.schedule, dp_of(2, false, {1})), std::invalid_argument);
}

// A measured-looking trace: events out of order, overlapping collectives on a rank, a rank whose
// collective ends before its compute does.
Trace hand_trace() {
  Trace t;
  t.ranks = 2;
  const Action f = Action::single(Op::F, 0, 0), b = Action::single(Op::B, 0, 0);
  t.compute = {{0, 0, 2, f},
               {0, 2, 6, b},
               {1, 1, 3, Action::single(Op::F, 1, 0)},
               {1, 3, 5, Action::single(Op::B, 1, 0)}};
  // Rank 0: [4,8] and [7,10] overlap: exposed after 6 is [6,10] = 4, total time 7.
  // Rank 1: [2,4] hidden behind compute (ends 5): exposed 0.
  t.collectives = {{0, 4, 8, 0, 100}, {0, 7, 10, 0, 50}, {1, 2, 4, 1, 10}};
  return t;
}

TEST(DataParallelMetrics, CollectivesExtendTheMakespanNotTheBusyTime) {
  const Placement p = Placement::linear(2, 1);
  const Metrics m = compute_metrics(hand_trace(), p);
  EXPECT_DOUBLE_EQ(m.makespan, 10);
  EXPECT_DOUBLE_EQ(m.ranks[0].busy, 6);
  EXPECT_DOUBLE_EQ(m.ranks[1].busy, 4);
  EXPECT_DOUBLE_EQ(m.bubble_fraction, (4.0 + 6.0) / 20);
  EXPECT_DOUBLE_EQ(m.ranks[0].allreduce_time, 7);
  EXPECT_DOUBLE_EQ(m.ranks[0].allreduce_bytes, 150);
  EXPECT_DOUBLE_EQ(m.ranks[0].exposed_allreduce, 4);
  EXPECT_DOUBLE_EQ(m.ranks[1].exposed_allreduce, 0);
  EXPECT_DOUBLE_EQ(m.ranks[1].last_end, 5);  // its collective ended first
  EXPECT_DOUBLE_EQ(m.ranks[0].span_idle, 10 - 6);
  // zb rate: rank 0's span (10) is the longest.
  EXPECT_DOUBLE_EQ(m.zb_bubble_rate, 0.4);
  EXPECT_EQ(m.collectives, 3);
  EXPECT_DOUBLE_EQ(m.exposed_allreduce, 4);
}

TEST(DataParallelMetrics, TheSortedPathAgreesWithTheStreamedOne) {
  const Placement p = Placement::linear(2, 1);
  const Metrics a = compute_metrics(hand_trace(), p);
  Trace t = hand_trace();
  std::swap(t.compute[0], t.compute[1]);  // out of order: compute_metrics sorts
  const Metrics b = compute_metrics(t, p);
  EXPECT_DOUBLE_EQ(a.makespan, b.makespan);
  for (int r = 0; r < 2; ++r) {
    EXPECT_DOUBLE_EQ(a.ranks[r].exposed_allreduce, b.ranks[r].exposed_allreduce);
    EXPECT_DOUBLE_EQ(a.ranks[r].last_end, b.ranks[r].last_end);
  }
  EXPECT_DOUBLE_EQ(a.bubble_fraction, b.bubble_fraction);
  // Streamed by hand, collectives first: the order of the calls does not matter.
  MetricsStream s(p, 2);
  for (const auto& c : hand_trace().collectives) s.add_collective(c.rank, c.start, c.end, c.bytes);
  for (const auto& e : hand_trace().compute) s.add(e.rank, e.start, e.end, e.action);
  const Metrics c = s.finish();
  EXPECT_DOUBLE_EQ(c.makespan, 10);
  EXPECT_DOUBLE_EQ(c.ranks[0].exposed_allreduce, 4);
}

}  // namespace
}  // namespace ppbench
