// Replaying a measured step: where its optimizer steps go, and how they follow the all-reduces
// of a data-parallel step.
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "harness/replay.h"
#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::stage_cost;

// A measured-looking trace of 1F1B at D = 2, N = 2: each rank's actions back to back from 0,
// F taking 1 and B 2, so rank 0's actions (F F B B) end at 1, 2, 4, 6 and rank 1's (F B F B)
// at 1, 3, 4, 6.
Trace measured_1f1b() {
  const Schedule s = generate({"1f1b", 2, 2});
  Trace t;
  t.ranks = 2;
  t.time_unit = "s";
  for (int r = 0; r < 2; ++r) {
    double at = 0;
    for (const Action& a : s.ranks[r]) {
      const double d = a.task.op == Op::F ? 1 : 2;
      t.compute.push_back({r, at, at + d, a});
      at += d;
    }
  }
  return t;
}

// A receive that found its tensor already sent took only the consumer's own work; one that
// waited took the latency as well, which is what the replay's delay keeps.
TEST(Replay, HandOversSplitIntoTheConsumersWorkAndTheLatency) {
  Trace t = measured_1f1b();
  t.comm = {{0, 1, 1.0, 1.5, {Op::F, 0, 0}, false},   // waited: 0.5
            {0, 1, 3.0, 3.25, {Op::F, 0, 1}, true},   // queued: 0.25
            {1, 0, 3.0, 3.75, {Op::B, 1, 0}, false},  // waited: 0.75
            {1, 0, 6.0, 6.25, {Op::B, 1, 1}, true}};  // queued: 0.25
  HandOver h = hand_over_from_trace(t);
  EXPECT_DOUBLE_EQ(h.receive, 0.25);
  EXPECT_DOUBLE_EQ(h.delay, 0.625 - 0.25);
  const CostModel c = costs_from_trace(t, Placement::linear(2, 2));
  for (const StageCost& st : c.stages()) {
    EXPECT_DOUBLE_EQ(st.recv, 0.25);
    EXPECT_DOUBLE_EQ(st.comm, 0.375);
  }
  // Every receive waited (as the GPU executors record them): the plain mean, no receive cost.
  for (CommEvent& e : t.comm) e.queued = false;
  h = hand_over_from_trace(t);
  EXPECT_DOUBLE_EQ(h.receive, 0.0);
  EXPECT_DOUBLE_EQ(h.delay, (0.5 + 0.25 + 0.75 + 0.25) / 4);
  // Every receive queued: no latency seen, the work alone.
  for (CommEvent& e : t.comm) e.queued = true;
  h = hand_over_from_trace(t);
  EXPECT_DOUBLE_EQ(h.delay, 0.0);
  EXPECT_DOUBLE_EQ(h.receive, (0.5 + 0.25 + 0.75 + 0.25) / 4);
  // Waiting receives quicker than the queued ones: the latency is not negative.
  t.comm = {{0, 1, 1.0, 1.1, {Op::F, 0, 0}, false}, {0, 1, 3.0, 3.5, {Op::F, 0, 1}, true}};
  h = hand_over_from_trace(t);
  EXPECT_DOUBLE_EQ(h.delay, 0.0);
  EXPECT_DOUBLE_EQ(h.receive, 0.5);
}

TEST(Replay, AnOptimizerStepFollowsTheActionItsRankHadLastFinished) {
  Trace t = measured_1f1b();
  t.updates = {{0, 6.0, 6.5, 0},    // right after rank 0's last action (ends 6)
               {1, 3.25, 4.0, 1},   // after rank 1's second action (ends 3), before the third
               {1, -1.0, 0.0, 1}};  // before any action: nothing to follow, left out
  const auto steps = optimizer_steps_from_trace(t, Placement::linear(2, 2));
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].rank, 0);
  EXPECT_EQ(steps[0].position, 3u);
  EXPECT_DOUBLE_EQ(steps[0].duration, 0.5);
  EXPECT_EQ(steps[1].rank, 1);
  EXPECT_EQ(steps[1].position, 1u);
  EXPECT_EQ(steps[1].stage, 1);
  EXPECT_DOUBLE_EQ(steps[1].duration, 0.75);
}

TEST(Replay, AnOptimizerStepOnAnotherRankIsAnInternalError) {
  Trace t = measured_1f1b();
  t.updates = {{5, 6.0, 6.5, 0}};
  EXPECT_THROW(optimizer_steps_from_trace(t, Placement::linear(2, 2)), std::logic_error);
}

TEST(Replay, OptimizerStepsAfterTheAllReducesStartWhenTheRankIsFree) {
  Trace t = measured_1f1b();
  t.collectives = {{0, 6.0, 9.0, -1, 64.0}};  // rank 0's all-reduce ends at 9
  add_updates_after_allreduces(t, {{.rank = 0, .position = 3, .stage = 0, .duration = 0.5},
                                   {.rank = 1, .position = 3, .stage = 1, .duration = 1.0},
                                   {.rank = 1, .position = 3, .stage = 2, .duration = 2.0}});
  ASSERT_EQ(t.updates.size(), 3u);
  EXPECT_DOUBLE_EQ(t.updates[0].start, 9.0);  // after the all-reduce
  EXPECT_DOUBLE_EQ(t.updates[0].end, 9.5);
  EXPECT_DOUBLE_EQ(t.updates[1].start, 6.0);  // rank 1 has none: after its last action
  EXPECT_DOUBLE_EQ(t.updates[2].start, 7.0);  // one after another
  EXPECT_DOUBLE_EQ(t.updates[2].end, 9.0);
}

// Where rank threads shared cores, an action's span holds other ranks' slices: the replay costs
// each op by its thread's CPU time plus the rank's executor work (its CPU time on neither an
// action nor an optimizer step) spread over its actions, and replays the step on those cores.
TEST(Replay, SharedCoresCostEachOpByItsCpuTimeAndTheExecutorsWork) {
  Trace t = measured_1f1b();
  t.shared_cores = 1;
  for (ComputeEvent& e : t.compute) e.cpu = (e.end - e.start) / 2;  // the spans held waits
  t.compute[0].send = 0.1, t.compute[0].sends = 1;  // its CPU time is in rank_cpu already
  t.updates = {{0, 6.0, 7.0, 0, 0.25}};
  // Rank 0: actions 0.5 + 0.5 + 1 + 1 = 3, its update 0.25, so 0.75 of executor work over 4
  // actions; rank 1: 3 on actions and 0.4 besides.
  t.rank_cpu = {4.0, 3.4};
  const CostModel c = costs_from_trace(t, Placement::linear(2, 2));
  EXPECT_DOUBLE_EQ(c.stages()[0].f, 0.5 + 0.75 / 4);
  EXPECT_DOUBLE_EQ(c.stages()[0].b, 1.0 + 0.75 / 4);
  EXPECT_DOUBLE_EQ(c.stages()[1].f, 0.5 + 0.1);
  EXPECT_DOUBLE_EQ(c.stages()[1].b, 1.0 + 0.1);
  EXPECT_DOUBLE_EQ(c.stages()[0].send, 0.0);
  const auto steps = optimizer_steps_from_trace(t, Placement::linear(2, 2));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_DOUBLE_EQ(steps[0].duration, 0.25);  // its CPU time, not its span

  // Without shared cores the spans are the costs, whatever else the trace holds.
  t.shared_cores = 0;
  const CostModel spans = costs_from_trace(t, Placement::linear(2, 2));
  EXPECT_DOUBLE_EQ(spans.stages()[0].f, 1.0);
  EXPECT_DOUBLE_EQ(spans.stages()[1].b, 2.0);
  EXPECT_DOUBLE_EQ(spans.stages()[0].send, 0.1);
}

// Per-stage costs of a DualPipeV step at D = 2 whose stages differ, the last (the loss head, on
// rank 0 beside stage 0) cheapest, each overlapped pair saving some time.
CostModel unequal_v_costs() {
  std::vector<StageCost> stages;
  for (double scale : {1.0, 1.5, 0.7, 0.1}) {
    StageCost c = stage_cost(scale, scale, scale);
    c.fb = c.f + c.b - 0.4 * scale;
    stages.push_back(c);
  }
  return CostModel(stages);
}

// A V shape overlaps the forward of one stage with the backward of another: the replay gives each
// pair the time it took, whatever the two stages' own backwards cost. (It once charged a pair its
// forward stage's pair time plus its backward stage's B less the forward stage's: on rank 0 of
// this step, F0+B3 took -1.0 and F3+B0 3.86 instead of 0.8 and 2.06.)
TEST(Replay, AVShapesPairsTakeTheirMeasuredTime) {
  const Schedule s = generate({"dualpipev", 2, 8});
  const Trace measured = simulate(s, unequal_v_costs());
  const Trace replayed = simulate(s, costs_from_trace(measured, s.placement));
  ASSERT_EQ(replayed.compute.size(), measured.compute.size());
  int pairs = 0;
  for (std::size_t k = 0; k < measured.compute.size(); ++k) {
    const ComputeEvent& want = measured.compute[k];
    pairs += want.action.paired();
    EXPECT_NEAR(replayed.compute[k].start, want.start, 1e-9) << to_string(want.action);
    EXPECT_NEAR(replayed.compute[k].end, want.end, 1e-9) << to_string(want.action);
  }
  EXPECT_GT(pairs, 4);
}

// A producer's time in its send calls (ComputeEvent::send) is what the replay charges each
// output that leaves its rank: with it a step whose senders lost time so is reproduced; without
// it (the replay before it) the ranks come out free too early.
TEST(Replay, ASendersTimeInItsSendCallsHoldsItsRank) {
  for (const char* family : {"1f1b", "interleaved-1f1b", "dualpipev"}) {
    const Schedule s = generate({family, 2, 8, family == std::string("interleaved-1f1b") ? 2 : 0});
    StageCost c = stage_cost(1, 1, 1, 0.1);
    c.send = 0.3;
    const Trace measured = simulate(s, CostModel::uniform(s.stages(), c));
    EXPECT_NEAR(hand_over_from_trace(measured).send, 0.3, 1e-12) << family;
    const CostModel costs = costs_from_trace(measured, s.placement);
    const Trace replayed = simulate(s, costs);
    ASSERT_EQ(replayed.compute.size(), measured.compute.size());
    for (std::size_t k = 0; k < measured.compute.size(); ++k)
      EXPECT_NEAR(replayed.compute[k].start, measured.compute[k].start, 1e-9)
          << family << " " << to_string(measured.compute[k].action);
    std::vector<StageCost> unsent = costs.stages();
    for (StageCost& st : unsent) st.send = 0;
    EXPECT_LT(compute_metrics(simulate(s, CostModel(unsent)), s.placement).makespan,
              compute_metrics(measured, s.placement).makespan - 0.5)
        << family;
  }
  // Sends that found no room were not timed: the mean is over the timed ones alone.
  Trace t = measured_1f1b();
  t.compute[0].send = 0.5, t.compute[0].sends = 1;
  t.compute[5].send = 0.3, t.compute[5].sends = 2;
  EXPECT_DOUBLE_EQ(hand_over_from_trace(t).send, 0.8 / 3);
}

}  // namespace
}  // namespace ppbench
