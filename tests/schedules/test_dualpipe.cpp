// DualPipe and DualPipeV: the reference's per-rank order, soundness, the
// closed forms (docs/schedules.md) against the simulator, and parameter checks.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cost_model.h"
#include "harness/metrics.h"
#include "harness/simulator.h"
#include "schedules/formulas.h"
#include "schedules/generators/dual_rank_program.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace ppbench {
namespace {

Schedule make(const char* name, int d, int n) { return generate({name, d, n, 0, 0}); }

Metrics simulate_uniform(const Schedule& s, const UniformCost& c) {
  const StageCost cost{c.f, c.b, c.i, c.w, c.fb, 0};
  return compute_metrics(simulate(s, CostModel::uniform(s.stages(), cost)), s.placement);
}

double max_idle(const Metrics& m) {
  double most = 0;
  for (const auto& r : m.ranks) most = std::max(most, r.idle);
  return most;
}

// Hand-executed from DualPipe.step in deepseek-ai/DualPipe dualpipe/dualpipe.py
// with num_ranks = 4, num_chunks = 8. Ranks 1 and 2 are the middle ranks (first
// F0 and B1 of step 4 not overlapped); ranks 2 and 3 swap their phases, so
// their phase 0 is chain 1 (stages 5 and 4).
TEST(DualPipe, MatchesReferenceOrderD4N8) {
  const std::string expected =
      "rank 0: F0.0 F0.1 F0.2 F7.0 I7.0 W7.0 F7.1 (F0.3+B7.1) (F7.2+B0.0) B7.2 (F7.3+B0.1) B7.3 "
      "I0.2 W0.2 I0.3 W0.3\n"
      "rank 1: F1.0 F6.0 F1.1 F6.1 F1.2 B6.0 (F6.2+B1.0) (F1.3+B6.1) (F6.3+B1.1) B6.2 B1.2 I6.3 "
      "I1.3 W6.3 W1.3\n"
      "rank 2: F5.0 F2.0 F5.1 F2.1 F5.2 B2.0 (F2.2+B5.0) (F5.3+B2.1) (F2.3+B5.1) B2.2 B5.2 I2.3 "
      "I5.3 W2.3 W5.3\n"
      "rank 3: F4.0 F4.1 F4.2 F3.0 I3.0 W3.0 F3.1 (F4.3+B3.1) (F3.2+B4.0) B3.2 (F3.3+B4.1) B3.3 "
      "I4.2 W4.2 I4.3 W4.3\n";
  EXPECT_EQ(to_text(make("dualpipe", 4, 8)), expected);
}

// Hand-executed from DualPipeV.step (dualpipe/dualpipev.py), num_ranks = 2,
// num_chunks = 4: rank 1 is the last rank, where the V turns.
TEST(DualPipeV, MatchesReferenceOrderD2N4) {
  const std::string expected =
      "rank 0: F0.0 F0.1 F0.2 F3.0 I3.0 W3.0 F3.1 (F0.3+B3.1) (F3.2+B0.0) B3.2 (F3.3+B0.1) B3.3 "
      "I0.2 W0.2 I0.3 W0.3\n"
      "rank 1: F1.0 F2.0 F1.1 F2.1 F1.2 B2.0 (F2.2+B1.0) (F1.3+B2.1) (F2.3+B1.1) B2.2 B1.2 I2.3 "
      "I1.3 W2.3 W1.3\n";
  EXPECT_EQ(to_text(make("dualpipev", 2, 4)), expected);
}

// num_ranks = 3, num_chunks = 6: step 6 turns zero bubble on between B1 and B0
// (rank 2, even) and before B1 (rank 1, odd), and the W queue is FIFO across
// both stages (rank 1's step 7 runs W4.5 before W1.4).
TEST(DualPipeV, MatchesReferenceOrderD3N6) {
  const std::string expected =
      "rank 0: F0.0 F0.1 F0.2 F0.3 F0.4 F5.0 I5.0 W5.0 F5.1 I5.1 W5.1 F5.2 (F0.5+B5.2) "
      "(F5.3+B0.0) B5.3 (F5.4+B0.1) B5.4 (F5.5+B0.2) B5.5 I0.3 W0.3 I0.4 W0.4 I0.5 W0.5\n"
      "rank 1: F1.0 F1.1 F1.2 F4.0 F1.3 F4.1 I4.0 W4.0 F4.2 (F1.4+B4.1) (F4.3+B1.0) (F1.5+B4.2) "
      "(F4.4+B1.1) B4.3 (F4.5+B1.2) B4.4 B1.3 I4.5 I1.4 W4.5 I1.5 W1.4 W1.5\n"
      "rank 2: F2.0 F3.0 F2.1 F3.1 F2.2 F3.2 F2.3 B3.0 (F3.3+B2.0) (F2.4+B3.1) (F3.4+B2.1) "
      "(F2.5+B3.2) (F3.5+B2.2) B3.3 B2.3 B3.4 I2.4 I3.5 I2.5 W2.4 W3.5 W2.5\n";
  EXPECT_EQ(to_text(make("dualpipev", 3, 6)), expected);
}

TEST(DualPipe, ValidForEvenDevicesAndEvenMicrobatches) {
  for (int d = 2; d <= 16; d += 2)
    for (int n = 2 * d; n <= 4 * d + 6; n += 2) {
      const Schedule s = make("dualpipe", d, n);
      EXPECT_NO_THROW(validate(s)) << "D=" << d << " N=" << n;
      EXPECT_EQ(s.stages(), 2 * d);
    }
}

TEST(DualPipeV, ValidForOddAndEvenDevicesAndMicrobatches) {
  for (int d = 1; d <= 16; ++d)
    for (int n = 2 * d; n <= 4 * d + 5; ++n) {
      const Schedule s = make("dualpipev", d, n);
      EXPECT_NO_THROW(validate(s)) << "D=" << d << " N=" << n;
      EXPECT_EQ(s.stages(), 2 * d);
    }
}

// DualPipeV on D ranks is the first half of DualPipe on 2D ranks with twice the
// micro-batches (one direction of it): the same step counts, so the same timing.
TEST(DualPipeV, TimesLikeHalfOfDualPipe) {
  const UniformCost c{2, 3, 2, 1, 4};
  for (int d : {2, 3, 4})
    for (int n : {2 * d, 3 * d}) {
      const Metrics v = simulate_uniform(make("dualpipev", d, n), c);
      const Metrics full = simulate_uniform(make("dualpipe", 2 * d, 2 * n), c);
      EXPECT_NEAR(v.makespan, full.makespan, 1e-9) << "D=" << d << " N=" << n;
      for (int r = 0; r < d; ++r) EXPECT_NEAR(v.ranks[r].idle, full.ranks[r].idle, 1e-9);
    }
}

// Cost settings as the paper draws them: I = F, W <= F, B <= FB <= F + B.
const UniformCost kAsDrawn[] = {
    {1, 2, 1, 1, 3}, {2, 3, 2, 1, 5}, {2, 3, 2, 1, 4},          {2, 3, 2, 1, 3},
    {3, 6, 3, 3, 7}, {1, 1, 1, 0, 1}, {1.5, 2, 1.5, 0.5, 3.25},
};

void expect_closed_form_holds(const char* name, int d, int n, const UniformCost& c) {
  const Schedule s = make(name, d, n);
  const Metrics m = simulate_uniform(s, c);
  const ClosedForm cf = closed_form(s.params, c);
  const std::string where = std::string(name) + " D=" + std::to_string(d) +
                            " N=" + std::to_string(n) + " F=" + std::to_string(c.f) +
                            " W=" + std::to_string(c.w) + " FB=" + std::to_string(c.fb);
  ASSERT_TRUE(cf.idle_per_rank.has_value()) << where;
  EXPECT_NEAR(max_idle(m), *cf.idle_per_rank, 1e-9) << where;
  if (c.fb == c.f + c.b) {
    // Nothing saved by overlapping: every rank idles exactly as long.
    for (const auto& r : m.ranks) EXPECT_NEAR(r.idle, *cf.idle_per_rank, 1e-9) << where;
    ASSERT_TRUE(cf.bubble_fraction.has_value()) << where;
    EXPECT_NEAR(m.bubble_fraction, *cf.bubble_fraction, 1e-9) << where;
  } else {
    EXPECT_FALSE(cf.bubble_fraction.has_value()) << where;
  }
  ASSERT_TRUE(cf.peak_activations.has_value());
  for (const auto& r : m.ranks) EXPECT_EQ(r.peak_activations, *cf.peak_activations) << where;
}

TEST(DualPipe, SimulatorMatchesClosedForm) {
  for (const auto& c : kAsDrawn)
    for (int d : {2, 4, 6, 8, 16})
      for (int n : {2 * d, 2 * d + 2, 5 * d}) expect_closed_form_holds("dualpipe", d, n, c);
}

TEST(DualPipeV, SimulatorMatchesClosedForm) {
  for (const auto& c : kAsDrawn)
    for (int d : {1, 2, 3, 4, 5, 8})
      for (int n : {2 * d, 2 * d + 1, 5 * d}) expect_closed_form_holds("dualpipev", d, n, c);
}

// Outside the drawn shape the formula is not the simulated idle, so the closed
// form leaves it out; the measured idle shows why (D=8, N=32 for DualPipe).
TEST(DualPipe, ClosedFormIdleOnlyAsDrawn) {
  const Schedule s = make("dualpipe", 8, 32);
  struct Case {
    UniformCost c;
    double formula, simulated_max_idle;
  };
  const Case cases[] = {
      {{2, 2, 1, 1, 4}, 9, 12},   // I < F
      {{1, 3, 2, 1, 4}, 12, 11},  // I > F
      {{1, 3, 1, 2, 4}, 3, 6},    // W > F
  };
  for (const auto& k : cases) {
    EXPECT_FALSE(closed_form(s.params, k.c).idle_per_rank.has_value());
    EXPECT_NEAR(3 * (k.c.fb + k.c.b - 3 * k.c.w), k.formula, 1e-9);
    EXPECT_NEAR(max_idle(simulate_uniform(s, k.c)), k.simulated_max_idle, 1e-9);
  }
  // FB < B (refused by --cost): no pair ends before its longer half, so the step is FB = B's,
  // and the formula, which reads FB as given, is left out.
  const UniformCost below{2, 3, 2, 1, 2}, at_b{2, 3, 2, 1, 3};
  EXPECT_FALSE(closed_form(s.params, below).idle_per_rank.has_value());
  EXPECT_NEAR(max_idle(simulate_uniform(s, below)), max_idle(simulate_uniform(s, at_b)), 1e-9);
}

TEST(DualPipe, RejectsWhatTheReferenceRejects) {
  for (auto [d, n] : {std::pair{1, 2}, {3, 6}, {5, 10}, {4, 9}, {4, 6}, {4, 2}, {8, 14}, {2, 3}})
    EXPECT_THROW(make("dualpipe", d, n), UsageError) << "D=" << d << " N=" << n;
}

TEST(DualPipeV, RejectsWhatTheReferenceRejects) {
  for (auto [d, n] : {std::pair{1, 1}, {2, 3}, {3, 5}, {4, 7}, {8, 1}})
    EXPECT_THROW(make("dualpipev", d, n), UsageError) << "D=" << d << " N=" << n;
}

}  // namespace
}  // namespace ppbench

namespace ppbench {
namespace {

TEST(DualSteps, TheWeightQueueIsCheckedAsTheReferenceDoes) {
  RankProgram p(0, 1);
  EXPECT_THROW(p.weight(), std::logic_error);  // no deferred W to run
  RankProgram q(0, 1);
  q.forward(0);
  q.backward(0, true);
  EXPECT_THROW(q.take(), std::logic_error);  // a W left behind
  q.weight();
  EXPECT_EQ(q.take().size(), 3u);
}

TEST(DualSteps, DualPipeAndDualPipeVShareTheReferenceCounts) {
  // DualPipe's half rank h of D ranks over N/2 chunks per direction counts like DualPipeV's
  // rank h of D/2 ranks over N/2 chunks: the same formulas.
  const DualStepCounts c = dual_step_counts(4, 1, 10);
  EXPECT_EQ(c.step_1, 4);
  EXPECT_EQ(c.step_2, 2);
  EXPECT_EQ(c.step_3, 2);
  EXPECT_EQ(c.step_4, 10 - 8 + 1 + 1);
  EXPECT_EQ(c.step_5, 2);
  EXPECT_EQ(c.step_6, 2);
  EXPECT_EQ(c.step_7, 2);
  EXPECT_EQ(c.step_8, 2);
}

}  // namespace
}  // namespace ppbench
