// Looped BFS and interleaved zero bubble, the orders of PyTorch's
// ScheduleLoopedBFS and ScheduleInterleavedZeroBubble: golden orders from
// PyTorch itself, soundness over a grid, the breadth-first bubble against the
// simulator, how they reduce to GPipe and ZB-H1 with one chunk, and the
// parameter rules.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::simulate_uniform;
using testing::stage_cost;

Schedule make(const char* name, int d, int n, int v) { return generate({name, d, n, v, 0}); }

std::string where(const char* name, int d, int n, int v) {
  return std::string(name) + " D=" + std::to_string(d) + " N=" + std::to_string(n) +
         " v=" + std::to_string(v);
}

// ---- Golden orders ---------------------------------------------------------
//
// Each expected text is what PyTorch 2.15.0's schedule class computed
// (scripts/torch_orders.py FAMILY D N V: pipeline_order with its idle slots
// dropped), pasted unchanged.

// ScheduleLoopedBFS, D=4, N=4, 2 local stages per rank.
TEST(LoopedBfs, GoldenTorchD4N4V2) {
  EXPECT_EQ(to_text(make("looped-bfs", 4, 4, 2)),
            "rank 0: F0.0 F0.1 F0.2 F0.3 F4.0 F4.1 F4.2 F4.3 B4.3 B4.2 B4.1 B4.0 B0.3 B0.2 B0.1 "
            "B0.0\n"
            "rank 1: F1.0 F1.1 F1.2 F1.3 F5.0 F5.1 F5.2 F5.3 B5.3 B5.2 B5.1 B5.0 B1.3 B1.2 B1.1 "
            "B1.0\n"
            "rank 2: F2.0 F2.1 F2.2 F2.3 F6.0 F6.1 F6.2 F6.3 B6.3 B6.2 B6.1 B6.0 B2.3 B2.2 B2.1 "
            "B2.0\n"
            "rank 3: F3.0 F3.1 F3.2 F3.3 F7.0 F7.1 F7.2 F7.3 B7.3 B7.2 B7.1 B7.0 B3.3 B3.2 B3.1 "
            "B3.0\n");
}

// ScheduleLoopedBFS, D=2, N=3 (not a multiple of D), 3 local stages per rank.
TEST(LoopedBfs, GoldenTorchD2N3V3) {
  EXPECT_EQ(to_text(make("looped-bfs", 2, 3, 3)),
            "rank 0: F0.0 F0.1 F0.2 F2.0 F2.1 F2.2 F4.0 F4.1 F4.2 B4.2 B4.1 B4.0 B2.2 B2.1 B2.0 "
            "B0.2 B0.1 B0.0\n"
            "rank 1: F1.0 F1.1 F1.2 F3.0 F3.1 F3.2 F5.0 F5.1 F5.2 B5.2 B5.1 B5.0 B3.2 B3.1 B3.0 "
            "B1.2 B1.1 B1.0\n");
}

// ScheduleInterleavedZeroBubble, D=4, N=8 (two rounds of 4), 2 local stages.
TEST(InterleavedZb, GoldenTorchD4N8V2) {
  EXPECT_EQ(
      to_text(make("interleaved-zb", 4, 8, 2)),
      "rank 0: F0.0 F0.1 F0.2 F0.3 F4.0 F4.1 F4.2 F4.3 I4.0 W4.0 F0.4 I4.1 W4.1 F0.5 I4.2 W4.2 "
      "F0.6 I4.3 W4.3 F0.7 I0.0 W0.0 F4.4 I0.1 W0.1 F4.5 I0.2 W0.2 F4.6 I0.3 W0.3 F4.7 I4.4 W4.4 "
      "I4.5 W4.5 I4.6 W4.6 I4.7 W4.7 I0.4 W0.4 I0.5 W0.5 I0.6 W0.6 I0.7 W0.7\n"
      "rank 1: F1.0 F1.1 F1.2 F1.3 F5.0 F5.1 F5.2 I5.0 F5.3 I5.1 W5.0 F1.4 I5.2 W5.1 F1.5 I5.3 "
      "W5.2 F1.6 I1.0 W5.3 F1.7 I1.1 W1.0 F5.4 I1.2 W1.1 F5.5 I1.3 W1.2 F5.6 I5.4 W1.3 F5.7 I5.5 "
      "W5.4 I5.6 W5.5 I5.7 W5.6 I1.4 W5.7 I1.5 W1.4 I1.6 W1.5 I1.7 W1.6 W1.7\n"
      "rank 2: F2.0 F2.1 F2.2 F2.3 F6.0 F6.1 I6.0 F6.2 I6.1 F6.3 I6.2 W6.0 F2.4 I6.3 W6.1 F2.5 "
      "I2.0 W6.2 F2.6 I2.1 W6.3 F2.7 I2.2 W2.0 F6.4 I2.3 W2.1 F6.5 I6.4 W2.2 F6.6 I6.5 W2.3 F6.7 "
      "I6.6 W6.4 I6.7 W6.5 I2.4 W6.6 I2.5 W6.7 I2.6 W2.4 I2.7 W2.5 W2.6 W2.7\n"
      "rank 3: F3.0 F3.1 F3.2 F3.3 F7.0 I7.0 F7.1 I7.1 F7.2 I7.2 F7.3 I7.3 W7.0 F3.4 I3.0 W7.1 "
      "F3.5 I3.1 W7.2 F3.6 I3.2 W7.3 F3.7 I3.3 W3.0 F7.4 I7.4 W3.1 F7.5 I7.5 W3.2 F7.6 I7.6 W3.3 "
      "F7.7 I7.7 W7.4 I3.4 W7.5 I3.5 W7.6 I3.6 W7.7 I3.7 W3.4 W3.5 W3.6 W3.7\n");
}

// ScheduleInterleavedZeroBubble, D=2, N=4, 3 local stages per rank.
TEST(InterleavedZb, GoldenTorchD2N4V3) {
  EXPECT_EQ(
      to_text(make("interleaved-zb", 2, 4, 3)),
      "rank 0: F0.0 F0.1 F2.0 F2.1 F4.0 F4.1 I4.0 W4.0 F0.2 I4.1 W4.1 F0.3 I2.0 W2.0 F2.2 I2.1 "
      "W2.1 F2.3 I0.0 W0.0 F4.2 I0.1 W0.1 F4.3 I4.2 W4.2 I4.3 W4.3 I2.2 W2.2 I2.3 W2.3 I0.2 W0.2 "
      "I0.3 W0.3\n"
      "rank 1: F1.0 F1.1 F3.0 F3.1 F5.0 I5.0 F5.1 I5.1 W5.0 F1.2 I3.0 W5.1 F1.3 I3.1 W3.0 F3.2 "
      "I1.0 W3.1 F3.3 I1.1 W1.0 F5.2 I5.2 W1.1 F5.3 I5.3 W5.2 I3.2 W5.3 I3.3 W3.2 I1.2 W3.3 I1.3 "
      "W1.2 W1.3\n");
}

// ScheduleInterleavedZeroBubble, D=4, N=3 < D (one round of 3), 2 local stages:
// the warm-up is all of chunk 0 and part of chunk 1.
TEST(InterleavedZb, GoldenTorchFewerMicroBatchesThanRanks) {
  EXPECT_EQ(to_text(make("interleaved-zb", 4, 3, 2)),
            "rank 0: F0.0 F0.1 F0.2 F4.0 F4.1 F4.2 I4.0 W4.0 I4.1 W4.1 I4.2 W4.2 I0.0 W0.0 I0.1 "
            "W0.1 I0.2 W0.2\n"
            "rank 1: F1.0 F1.1 F1.2 F5.0 F5.1 F5.2 I5.0 I5.1 W5.0 I5.2 W5.1 I1.0 W5.2 I1.1 W1.0 "
            "I1.2 W1.1 W1.2\n"
            "rank 2: F2.0 F2.1 F2.2 F6.0 F6.1 I6.0 F6.2 I6.1 I6.2 W6.0 I2.0 W6.1 I2.1 W6.2 I2.2 "
            "W2.0 W2.1 W2.2\n"
            "rank 3: F3.0 F3.1 F3.2 F7.0 I7.0 F7.1 I7.1 F7.2 I7.2 I3.0 W7.0 I3.1 W7.1 I3.2 W7.2 "
            "W3.0 W3.1 W3.2\n");
}

// ScheduleInterleavedZeroBubble with one local stage per rank, D=3, N=3.
TEST(InterleavedZb, GoldenTorchOneChunk) {
  EXPECT_EQ(to_text(make("interleaved-zb", 3, 3, 1)),
            "rank 0: F0.0 F0.1 F0.2 I0.0 W0.0 I0.1 W0.1 I0.2 W0.2\n"
            "rank 1: F1.0 F1.1 I1.0 F1.2 I1.1 W1.0 I1.2 W1.1 W1.2\n"
            "rank 2: F2.0 I2.0 F2.1 I2.1 F2.2 I2.2 W2.0 W2.1 W2.2\n");
}

// ---- Soundness and structure -------------------------------------------------

// Every allowed (D, N, v) of the comparison grid is deadlock-free; the
// interleaved placement holds (stage c*D + r on rank r).
TEST(LoopedBfsAndInterleavedZb, ValidOverGrid) {
  int checked = 0;
  for (const char* name : {"looped-bfs", "interleaved-zb"})
    for (int d = 1; d <= 8; ++d)
      for (int n = 1; n <= 4 * d; ++n)
        for (int v = 1; v <= 3; ++v) {
          Schedule s;
          try {
            s = make(name, d, n, v);
          } catch (const UsageError& e) {
            // Only interleaved-zb's rounds rule may refuse; a deadlock refusal fails here.
            const int rounds = std::max(1, n / d);
            EXPECT_TRUE(std::string(name) == "interleaved-zb" && n % rounds != 0)
                << where(name, d, n, v) << ": " << e.what();
            continue;
          }
          EXPECT_NO_THROW(validate(s)) << where(name, d, n, v);
          ASSERT_EQ(s.stages(), v * d) << where(name, d, n, v);
          for (int r = 0; r < d; ++r)
            for (const Action& a : s.ranks[r])
              ASSERT_EQ(a.task.stage % d, r) << where(name, d, n, v) << " " << to_string(a);
          ++checked;
        }
  EXPECT_EQ(checked, 753);  // 864 cases less the rounds rule's 111
}

// Interleaved ZB runs each rank's W passes in the order of its I passes (the
// oldest pending W first), as PyTorch's backward_op_ids queue does.
TEST(InterleavedZb, WeightPassesFollowInputPassOrder) {
  for (auto [d, n, v] : std::vector<std::array<int, 3>>{{4, 8, 2}, {3, 9, 3}, {8, 5, 2}}) {
    const Schedule s = make("interleaved-zb", d, n, v);
    for (int r = 0; r < d; ++r) {
      std::vector<Task> inputs, weights;
      for (const Action& a : s.ranks[r]) {
        if (a.task.op == Op::I) inputs.push_back({Op::W, a.task.stage, a.task.mb});
        if (a.task.op == Op::W) weights.push_back(a.task);
      }
      EXPECT_EQ(inputs, weights) << where("interleaved-zb", d, n, v) << " rank " << r;
    }
  }
}

// With one chunk per rank, PyTorch's interleaved ZB is ZB-H1 (warm-up D-r-1,
// W delayed by r) and looped BFS is GPipe (backwards from the last
// micro-batch).
TEST(LoopedBfsAndInterleavedZb, OneChunkIsZbH1AndGpipe) {
  for (int d = 1; d <= 6; ++d)
    for (int n = d; n <= 3 * d; n += d) {
      EXPECT_EQ(to_text(make("interleaved-zb", d, n, 1)), to_text(make("zb-h1", d, n, 0)))
          << d << " " << n;
      EXPECT_EQ(to_text(make("looped-bfs", d, n, 1)), to_text(make("gpipe", d, n, 0)))
          << d << " " << n;
    }
}

// ---- The breadth-first bubble --------------------------------------------------

// With N >= D, every loop's first micro-batch is back at rank 0 by the time it
// finishes the previous chunk, so the only idle time is one fill and one
// drain: (D-1)(F+B) per rank, bubble (D-1)/(D-1+vN), for any F and B.
TEST(LoopedBfs, ClosedFormHoldsInSimulatorWhenNAtLeastD) {
  for (const StageCost& c : {stage_cost(1, 1, 1), stage_cost(1, 2, 0.5), stage_cost(2, 0.5, 0.5)})
    for (int d : {1, 2, 3, 4, 8})
      for (int n = d; n <= 3 * d; n += (d + 1) / 2)
        for (int v = 1; v <= 3; ++v) {
          const auto r = simulate_uniform({"looped-bfs", d, n, v, 0}, c);
          const ClosedForm cf = closed_form(r.schedule.params, testing::uniform(c));
          ASSERT_TRUE(cf.bubble_fraction) << where("looped-bfs", d, n, v);
          ASSERT_TRUE(cf.idle_per_rank);
          EXPECT_NEAR(r.metrics.bubble_fraction, (d - 1.0) / (d - 1.0 + v * n), 1e-12)
              << where("looped-bfs", d, n, v);
          EXPECT_NEAR(*cf.bubble_fraction, r.metrics.bubble_fraction, 1e-12);
          for (const auto& rank : r.metrics.ranks)
            EXPECT_NEAR(rank.idle, *cf.idle_per_rank, 1e-9) << where("looped-bfs", d, n, v);
          ASSERT_TRUE(cf.peak_activations);
          EXPECT_EQ(r.metrics.peak_activations, *cf.peak_activations);
        }
}

// With N < D the ring is not full: each loop waits again, the bubble exceeds
// the formula, and the closed form says it claims none.
TEST(LoopedBfs, NoClosedFormWhenFewerMicroBatchesThanRanks) {
  const auto r = simulate_uniform({"looped-bfs", 4, 2, 2, 0}, stage_cost(1, 1, 1));
  const ClosedForm cf = closed_form(r.schedule.params, testing::uniform(stage_cost(1, 1, 1)));
  EXPECT_FALSE(cf.bubble_fraction);
  EXPECT_FALSE(cf.note.empty());
  EXPECT_GT(r.metrics.bubble_fraction, 3.0 / (3.0 + 4.0) + 0.01);
}

TEST(InterleavedZb, ClaimsNoClosedForm) {
  const ClosedForm cf = closed_form({"interleaved-zb", 4, 8, 2, 0}, {});
  EXPECT_FALSE(cf.bubble_fraction);
  EXPECT_FALSE(cf.idle_per_rank);
  EXPECT_FALSE(cf.note.empty());
}

// ---- Parameters ------------------------------------------------------------------

std::string usage_error(const ScheduleParams& p) {
  try {
    generate(p);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(LoopedBfsAndInterleavedZb, DefaultChunksIsTwo) {
  for (const char* name : {"looped-bfs", "interleaved-zb"}) {
    const Schedule s = make(name, 4, 8, 0);
    EXPECT_EQ(s.params.chunks, 2) << name;
    EXPECT_EQ(s.stages(), 8) << name;
  }
}

// PyTorch's rule: rounds = max(1, N / D), and N must be a multiple of them.
TEST(InterleavedZb, RejectsMicroBatchesNotAMultipleOfRounds) {
  const std::string why = usage_error({"interleaved-zb", 4, 9, 2, 0});
  EXPECT_NE(why.find("N=9 with D=4, 2 rounds"), std::string::npos) << why;
  EXPECT_NE(why.find("nearest: N=8 or N=10"), std::string::npos) << why;
  EXPECT_EQ(usage_error({"interleaved-zb", 4, 7, 2, 0}), "");   // one round of 7
  EXPECT_EQ(usage_error({"interleaved-zb", 4, 10, 2, 0}), "");  // two rounds of 5
  EXPECT_NE(usage_error({"interleaved-zb", 4, 13, 2, 0}), "");  // three rounds
}

// The rule as `ppbench list` and the refusal state it, N < 2D or N mod D a multiple of
// floor(N/D), is the generator's rule exactly: not "N < 2D or a multiple of D", which refuses
// D=4, N=10 (two rounds of 5).
TEST(InterleavedZb, StatedRoundsRuleIsTheGeneratorsRule) {
  for (int d = 1; d <= 6; ++d)
    for (int n = 1; n <= 8 * d; ++n) {
      const bool stated = n < 2 * d || (n % d) % (n / d) == 0;
      EXPECT_EQ(usage_error({"interleaved-zb", d, n, 1, 0}).empty(), stated)
          << "D=" << d << " N=" << n;
    }
  const std::string constraints(find_schedule("interleaved-zb").constraints);
  EXPECT_NE(constraints.find("N < 2D, or N mod D a multiple of floor(N/D)"), std::string::npos)
      << constraints;
  EXPECT_NE(usage_error({"interleaved-zb", 4, 9, 2, 0})
                .find("allowed: N < 2D, or N mod D a multiple of floor(N/D)"),
            std::string::npos);
}

TEST(LoopedBfsAndInterleavedZb, RejectGroupSizeAndNameTheFlagsOwners) {
  for (const char* name : {"looped-bfs", "interleaved-zb"}) {
    const std::string why = usage_error({name, 4, 8, 2, 4});
    EXPECT_NE(why.find("--group-size"), std::string::npos) << why;
    EXPECT_NE(why.find("only interleaved-1f1b"), std::string::npos) << why;
  }
  const std::string why = usage_error({"gpipe", 4, 8, 2, 0});
  EXPECT_NE(why.find("only interleaved-1f1b, looped-bfs, interleaved-zb take --chunks"),
            std::string::npos)
      << why;
}

}  // namespace
}  // namespace ppbench
