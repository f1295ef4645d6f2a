// The simulator and metrics on cases small enough to compute by hand, the
// --comm delay, and property tests over random valid parameters and costs.
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::for_random_schedules;
using testing::invalid_schedule_message;
using testing::simulate_uniform;
using testing::stage_cost;

TEST(Simulator, TwoStageOneFOneBByHand) {
  // D=2, N=2, F=1, B=2, comm 0.5:
  // rank 0: F0.0 [0,1] F0.1 [1,2]                  B0.0 [5.5,7.5] B0.1 [9,11]
  // rank 1:      F1.0 [1.5,2.5] B1.0 [2.5,4.5] F1.1 [4.5,5.5] B1.1 [5.5,7.5]
  // B0.1 waits for B1.1 (ends 7.5) + 0.5 = 8, and for rank 0 (free at 7.5).
  auto r = simulate_uniform({"1f1b", 2, 2}, stage_cost(1, 1, 1, 0.5));
  ASSERT_EQ(r.trace.compute.size(), 8u);
  const auto& e = r.trace.compute;
  EXPECT_DOUBLE_EQ(e[2].start, 5.0);  // B0.0: B1.0 ends 4.5, +0.5
  EXPECT_DOUBLE_EQ(e[3].start, 8.0);  // B0.1: B1.1 ends 7.5, +0.5
  EXPECT_DOUBLE_EQ(e[3].end, 10.0);
  EXPECT_DOUBLE_EQ(e[4].start, 1.5);  // F1.0
  EXPECT_DOUBLE_EQ(e[6].start, 4.5);  // F1.1: F0.1 ended at 2 + 0.5, but rank 1 busy to 4.5
  EXPECT_DOUBLE_EQ(r.metrics.makespan, 10.0);
  EXPECT_DOUBLE_EQ(r.metrics.ranks[0].busy, 6.0);
  EXPECT_DOUBLE_EQ(r.metrics.ranks[1].span_idle, (7.5 - 1.5) - 6.0);
  EXPECT_DOUBLE_EQ(r.metrics.bubble_fraction, (4.0 + 4.0) / (2 * 10.0));
  EXPECT_DOUBLE_EQ(r.metrics.bubble_ratio, 8.0 / 12.0);
  // zb rate: longest span is rank 0's (10), busy 6.
  EXPECT_DOUBLE_EQ(r.metrics.zb_bubble_rate, 0.4);
  // Four cross-rank dependencies, each a comm event of 0.5.
  ASSERT_EQ(r.trace.comm.size(), 4u);
  for (const auto& c : r.trace.comm) EXPECT_DOUBLE_EQ(c.end - c.start, 0.5);
}

TEST(Simulator, ARankTakesInEachCrossRankInputAfterItIsFreeAndTheInputHasArrived) {
  // The case above with a receive cost of 0.25 per cross-rank input:
  // rank 1: F1.0 arrives 1.5 -> [1.75,2.75] B1.0 [2.75,4.75]
  //         F1.1 arrived at 2.5, but rank 1 is free at 4.75 -> [5,6] B1.1 [6,8]
  // rank 0: B0.0: B1.0 ends 4.75 + 0.5 + 0.25 -> [5.5,7.5]
  //         B0.1: B1.1 ends 8 + 0.5 = 8.5, rank 0 free at 7.5 -> 8.75 -> [8.75,10.75]
  StageCost c = stage_cost(1, 1, 1, 0.5);
  c.recv = 0.25;
  auto r = simulate_uniform({"1f1b", 2, 2}, c);
  const auto& e = r.trace.compute;
  EXPECT_DOUBLE_EQ(e[4].start, 1.75);  // F1.0: arrived, then taken in
  EXPECT_DOUBLE_EQ(e[6].start, 5.0);   // F1.1: queued while rank 1 ran B1.0, then taken in
  EXPECT_DOUBLE_EQ(e[2].start, 5.5);   // B0.0
  EXPECT_DOUBLE_EQ(e[3].start, 8.75);  // B0.1
  EXPECT_DOUBLE_EQ(r.metrics.makespan, 10.75);
  // Taking an input in is neither an action nor a transfer: busy time and the transfers' spans
  // are as without it.
  EXPECT_DOUBLE_EQ(r.metrics.ranks[0].busy, 6.0);
  EXPECT_DOUBLE_EQ(r.metrics.ranks[1].busy, 6.0);
  for (const auto& t : r.trace.comm) EXPECT_DOUBLE_EQ(t.end - t.start, 0.5);
  // The first stage's forwards have no input from another rank: they start at once.
  EXPECT_DOUBLE_EQ(e[0].start, 0.0);
  EXPECT_DOUBLE_EQ(e[1].start, 1.0);
  // One rank has no other rank to receive from.
  auto one = simulate_uniform({"1f1b", 1, 2}, c);
  EXPECT_DOUBLE_EQ(one.metrics.makespan, 6.0);
}

TEST(Simulator, ASenderIsFreeOnlyAfterItsSendCallsButItsTensorsLeaveAtOnce) {
  // The first case with a send cost of 0.25 per output that crosses ranks:
  // rank 0: F0.0 [0,1] sends -> free 1.25, F0.1 [1.25,2.25] sends -> free 2.5
  // rank 1: F1.0 [1.5,2.5] (the last stage's F sends nothing) B1.0 [2.5,4.5] sends -> free 4.75
  //         F1.1 arrived at 2.75, rank free at 4.75 -> [4.75,5.75] B1.1 [5.75,7.75]
  // rank 0: B0.0: B1.0 ended 4.5, + 0.5 -> [5,7] (its send took its rank, not the tensor)
  //         B0.1: 7.75 + 0.5 -> [8.25,10.25]; the first stage's B sends nothing.
  StageCost c = stage_cost(1, 1, 1, 0.5);
  c.send = 0.25;
  auto r = simulate_uniform({"1f1b", 2, 2}, c);
  const auto& e = r.trace.compute;
  EXPECT_DOUBLE_EQ(e[1].start, 1.25);  // F0.1
  EXPECT_DOUBLE_EQ(e[4].start, 1.5);   // F1.0: F0.0's activation left as F0.0 ended
  EXPECT_DOUBLE_EQ(e[6].start, 4.75);  // F1.1
  EXPECT_DOUBLE_EQ(e[2].start, 5.0);   // B0.0
  EXPECT_DOUBLE_EQ(e[3].start, 8.25);  // B0.1
  EXPECT_DOUBLE_EQ(r.metrics.makespan, 10.25);
  // The trace says which actions sent, and for how long.
  const int sends[] = {1, 1, 0, 0, 0, 1, 0, 1};
  for (std::size_t k = 0; k < e.size(); ++k) {
    EXPECT_EQ(e[k].sends, sends[k]) << to_string(e[k].action);
    EXPECT_DOUBLE_EQ(e[k].send, 0.25 * sends[k]) << to_string(e[k].action);
  }
  // Sending is neither an action nor a transfer.
  EXPECT_DOUBLE_EQ(r.metrics.ranks[0].busy, 6.0);
  for (const auto& t : r.trace.comm) EXPECT_DOUBLE_EQ(t.end - t.start, 0.5);
  // One rank sends nothing.
  EXPECT_DOUBLE_EQ(simulate_uniform({"1f1b", 1, 2}, c).metrics.makespan, 6.0);
}

TEST(Simulator, AnOptimizerStepDelaysItsRankButNotWhatTheActionSends) {
  // The case above with a step of 1 on rank 1 after B1.0 (position 1), [4.5, 5.5]:
  // rank 1: F1.0 [1.5,2.5] B1.0 [2.5,4.5] update [4.5,5.5] F1.1 [5.5,6.5] B1.1 [6.5,8.5]
  // rank 0: B0.0 waits for B1.0's gradient, which left as B1.0 ended: 4.5 + 0.5 = 5 -> [5,7]
  //         (it waited for the update too, [6,8], when the update came before the send);
  //         B0.1 waits for B1.1: 8.5 + 0.5 = 9 -> [9,11].
  Schedule s = generate({"1f1b", 2, 2});
  validate(s);
  SimulateOptions o;
  o.optimizer_steps = {{.rank = 1, .position = 1, .stage = 1, .duration = 1.0}};
  const Trace t = simulate(s, CostModel::uniform(2, stage_cost(1, 1, 1, 0.5)), o);
  ASSERT_EQ(t.updates.size(), 1u);
  EXPECT_EQ(t.updates[0].rank, 1);
  EXPECT_EQ(t.updates[0].stage, 1);
  EXPECT_DOUBLE_EQ(t.updates[0].start, 4.5);
  EXPECT_DOUBLE_EQ(t.updates[0].end, 5.5);
  const auto& e = t.compute;
  EXPECT_DOUBLE_EQ(e[2].start, 5.0);  // B0.0
  EXPECT_DOUBLE_EQ(e[3].start, 9.0);  // B0.1
  EXPECT_DOUBLE_EQ(e[6].start, 5.5);  // F1.1
  EXPECT_DOUBLE_EQ(e[7].end, 8.5);    // B1.1
  const Metrics m = compute_metrics(t, s.placement);
  EXPECT_DOUBLE_EQ(m.makespan, 11.0);
  EXPECT_DOUBLE_EQ(m.ranks[1].busy, 7.0);  // six of compute and the step
  EXPECT_DOUBLE_EQ(m.ranks[0].busy, 6.0);

  // With a sender's cost of 0.25 an output: the update follows B1.0's send, [4.75, 5.75], and the
  // gradient still leaves at 4.5. Rank 0's forwards each send too: F0.1 [1.25,2.25].
  StageCost c = stage_cost(1, 1, 1, 0.5);
  c.send = 0.25;
  const Trace u = simulate(s, CostModel::uniform(2, c), o);
  ASSERT_EQ(u.updates.size(), 1u);
  EXPECT_DOUBLE_EQ(u.updates[0].start, 4.75);
  EXPECT_DOUBLE_EQ(u.updates[0].end, 5.75);
  EXPECT_DOUBLE_EQ(u.compute[2].start, 5.0);   // B0.0
  EXPECT_DOUBLE_EQ(u.compute[6].start, 5.75);  // F1.1, after the update
}

TEST(Simulator, AnOptimizerStepOutsideTheOrderIsRefused) {
  Schedule s = generate({"1f1b", 2, 2});
  validate(s);
  const CostModel c = CostModel::uniform(2, stage_cost(1, 1, 1));
  for (OptimizerStep bad : {OptimizerStep{.rank = 2, .position = 0, .stage = 0, .duration = 1},
                            OptimizerStep{.rank = 0, .position = 4, .stage = 0, .duration = 1},
                            OptimizerStep{.rank = 0, .position = 3, .stage = 0, .duration = -1}}) {
    SimulateOptions o;
    o.optimizer_steps = {bad};
    EXPECT_THROW(simulate(s, c, o), std::invalid_argument);
  }
}

TEST(Simulator, CommAddsTwoDelaysPerBoundaryToTheCriticalPath) {
  // GPipe's makespan with comm T: (N + D - 1)(F + B) + 2 (D - 1) T.
  for (int d : {2, 4, 8})
    for (int n : {1, 4, 9}) {
      const double t = 0.25;
      auto r = simulate_uniform({"gpipe", d, n}, stage_cost(1, 1, 1, t));
      EXPECT_NEAR(r.metrics.makespan, (n + d - 1) * 3.0 + 2 * (d - 1) * t, 1e-9) << d << " " << n;
    }
}

TEST(Simulator, OverlappedPairCostsFB) {
  Schedule s = generate({"1f1b", 2, 2});
  // Rank 1 overlaps F1.1 with B1.0.
  s.ranks[1] = {Action::single(Op::F, 1, 0), Action::pair({Op::F, 1, 1}, {Op::B, 1, 0}),
                Action::single(Op::B, 1, 1)};
  validate(s);
  StageCost c = stage_cost(1, 1, 1);
  c.fb = 2.5;
  Trace t = simulate(s, CostModel::uniform(2, c));
  const auto& pair = t.compute[4 + 1];
  EXPECT_TRUE(pair.action.paired());
  EXPECT_DOUBLE_EQ(pair.end - pair.start, 2.5);
}

TEST(Simulator, AnOverlappedPairNeverTakesLessThanItsLongerHalf) {
  // Rank 1 overlaps F1.1 with I1.0. With F = 3, I = W = 1 and FB = B = 2 the F+B saving (3) is
  // more than an F+I pair has to overlap: F + I - 3 = 1 would end the pair before its F alone.
  Schedule s = generate({"zb-h1", 2, 2});
  s.ranks[0] = {Action::single(Op::F, 0, 0), Action::single(Op::F, 0, 1),
                Action::single(Op::I, 0, 0), Action::single(Op::W, 0, 0),
                Action::single(Op::I, 0, 1), Action::single(Op::W, 0, 1)};
  s.ranks[1] = {Action::single(Op::F, 1, 0), Action::pair({Op::F, 1, 1}, {Op::I, 1, 0}),
                Action::single(Op::W, 1, 0), Action::single(Op::I, 1, 1),
                Action::single(Op::W, 1, 1)};
  validate(s);
  StageCost c = stage_cost(3, 1, 1);
  c.fb = 2;
  const Trace t = simulate(s, CostModel::uniform(2, c));
  const auto& pair = t.compute[6 + 1];
  ASSERT_TRUE(pair.action.paired());
  EXPECT_DOUBLE_EQ(pair.end - pair.start, 3);
  for (const auto& e : t.compute) EXPECT_GT(e.end, e.start) << to_string(e.action);
}

TEST(Simulator, AGradientTransferIsNamedAfterTheActionThatMadeIt) {
  for (const char* family : {"1f1b", "zb-h1"}) {
    const Schedule s = generate({family, 2, 2});
    validate(s);
    const Trace t = simulate(s, CostModel::uniform(2, stage_cost(1, 1, 1)));
    const Op backward = std::string(family) == "1f1b" ? Op::B : Op::I;
    int gradients = 0;
    for (const auto& e : t.comm) {
      if (e.src_rank != 1) continue;
      EXPECT_EQ(e.task.op, backward) << family;
      ++gradients;
    }
    EXPECT_EQ(gradients, 2) << family;
  }
}

TEST(Metrics, PeakCountsSplitBackwardUntilW) {
  // One rank, one stage, ops F0 I0 F1 W0 I1 W1: micro-batch 0 lives until W0,
  // so two are alive during F1.
  Schedule s;
  s.params = {"custom", 1, 2};
  s.placement = Placement::linear(1, 2);
  s.ranks = {{Action::single(Op::F, 0, 0), Action::single(Op::I, 0, 0), Action::single(Op::F, 0, 1),
              Action::single(Op::W, 0, 0), Action::single(Op::I, 0, 1),
              Action::single(Op::W, 0, 1)}};
  validate(s);
  Metrics m = compute_metrics(simulate(s, CostModel::uniform(1, stage_cost(1, 1, 1))), s.placement);
  EXPECT_EQ(m.ranks[0].peak_activations, 2);
  EXPECT_DOUBLE_EQ(m.bubble_fraction, 0.0);
}

// Busy time per rank is exactly what the schedule implies: the sum of its
// actions' costs, for any valid parameters and costs; and the simulation
// always terminates with every action timed once.
TEST(Property, RandomValidParametersAndCosts) {
  std::mt19937 rng(20261121);
  std::uniform_real_distribution<double> cost(0.1, 3.0), comm(0.0, 0.5);
  const int checked = for_random_schedules(
      rng, 600, 12, 40, 4,
      [&](int trial, const ScheduleInfo& info, const ScheduleParams& p, const Schedule& s) {
        validate(s);
        StageCost c = stage_cost(cost(rng), cost(rng), cost(rng), comm(rng));
        c.fb = c.f + c.b - 0.5 * std::min(c.f, c.b) * (trial % 2);
        const CostModel model = CostModel::uniform(s.stages(), c);
        const Trace t = simulate(s, model);
        ASSERT_EQ(t.compute.size(), s.action_count());
        const Metrics m = compute_metrics(t, s.placement);
        for (int r = 0; r < p.devices; ++r) {
          double implied = 0;
          for (const auto& a : s.ranks[r]) implied += model.time(a);
          EXPECT_NEAR(m.ranks[r].busy, implied, 1e-9 * (1 + implied)) << info.name << " rank " << r;
          EXPECT_GE(m.ranks[r].idle, -1e-9);
          EXPECT_GE(m.ranks[r].span_idle, -1e-9);
        }
        EXPECT_GE(m.bubble_fraction, -1e-12);
        EXPECT_LT(m.bubble_fraction, 1.0);
      });
  EXPECT_GT(checked, 200);
}

// The streamed metrics (no trace kept) equal the trace's, field by field, for every family under
// random per-stage costs and transfers; and a deadlock is worded as the validator words it.
TEST(SimulateMetrics, EqualsTheTracesMetrics) {
  std::mt19937 rng(20261124);
  std::uniform_real_distribution<double> cost(0.1, 3.0), comm(0.0, 0.7);
  const int checked = for_random_schedules(
      rng, 400, 10, 32, 3,
      [&](int, const ScheduleInfo& info, const ScheduleParams& p, const Schedule& s) {
        std::vector<StageCost> stages;
        for (int k = 0; k < s.stages(); ++k) {
          StageCost c = stage_cost(cost(rng), cost(rng), cost(rng), comm(rng));
          c.fb = c.f + c.b - 0.3 * std::min(c.f, c.b);
          c.send = comm(rng) / 2;
          stages.push_back(c);
        }
        const CostModel model(stages);
        const Metrics want = compute_metrics(simulate(s, model), s.placement);
        const Metrics got = simulate_metrics(s, model);
        const std::string where = std::string(info.name) + " D=" + std::to_string(p.devices) +
                                  " N=" + std::to_string(p.microbatches);
        EXPECT_EQ(got.makespan, want.makespan) << where;
        EXPECT_EQ(got.total_busy, want.total_busy) << where;
        EXPECT_EQ(got.bubble_fraction, want.bubble_fraction) << where;
        EXPECT_EQ(got.zb_bubble_rate, want.zb_bubble_rate) << where;
        EXPECT_EQ(got.peak_activations, want.peak_activations) << where;
        ASSERT_EQ(got.ranks.size(), want.ranks.size());
        for (std::size_t r = 0; r < got.ranks.size(); ++r) {
          EXPECT_EQ(got.ranks[r].busy, want.ranks[r].busy) << where << " rank " << r;
          EXPECT_EQ(got.ranks[r].first_start, want.ranks[r].first_start) << where << " rank " << r;
          EXPECT_EQ(got.ranks[r].last_end, want.ranks[r].last_end) << where << " rank " << r;
          EXPECT_EQ(got.ranks[r].peak_activations, want.ranks[r].peak_activations)
              << where << " rank " << r;
        }
      });
  EXPECT_GT(checked, 150);

  Schedule s = generate({"1f1b", 2, 2, 0, 0});
  std::swap(s.ranks[1][0], s.ranks[1][1]);  // rank 1 runs B1.0 before F1.0
  validate_structure(s);
  const std::string validator = invalid_schedule_message([&] { validate(s); });
  EXPECT_NE(validator, "");
  const CostModel costs = CostModel::uniform(s.stages(), StageCost{});
  EXPECT_EQ(invalid_schedule_message([&] { simulate_metrics(s, costs); }), validator);
  // The same walk on one shared core (test_shared_cores.cpp) words it the same way.
  EXPECT_EQ(invalid_schedule_message([&] { simulate_metrics(s, costs, 1); }), validator);
}

// The walk reads a NaN end time as "has not run yet": a NaN cost must be refused, not reported
// as a deadlock.
TEST(SimulateMetrics, RefusesCostsThatAreNotFinite) {
  const Schedule s = generate({"1f1b", 2, 4, 0, 0});
  StageCost bad;
  bad.f = std::numeric_limits<double>::quiet_NaN();
  const CostModel model(std::vector<StageCost>{StageCost{}, bad});
  ASSERT_EQ(s.stages(), 2);
  EXPECT_THROW(simulate_metrics(s, model), std::invalid_argument);
  EXPECT_THROW(simulate(s, model), std::invalid_argument);
}

}  // namespace
}  // namespace ppbench
