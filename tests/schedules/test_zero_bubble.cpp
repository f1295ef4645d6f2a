// Zero Bubble (Qi et al., ICLR 2024): ZB-H1, ZB-H2 and ZB-V. The per-rank
// orders of the paper's Figure 3 and of the authors' handcrafted ZB-V, their
// soundness, the bubble and memory claims against the simulator (and the cost
// conditions under which they hold exactly), and the parameter rules.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::simulate_uniform;
using testing::stage_cost;

Schedule make(const char* name, int d, int n) { return generate({name, d, n, 0, 0}); }

std::string where(const char* name, int d, int n, const StageCost& c) {
  return std::string(name) + " D=" + std::to_string(d) + " N=" + std::to_string(n) +
         " F=" + std::to_string(c.f) + " I=" + std::to_string(c.i) + " W=" + std::to_string(c.w);
}

const int kDevices[] = {2, 4, 8, 16};

// N from the smallest allowed to a few times D.
std::vector<int> microbatches(int least, int d) {
  std::vector<int> out;
  for (int n = least; n <= least + 3 * d + 2; n += (n < least + d ? 1 : d)) out.push_back(n);
  return out;
}

// ---- Golden orders, D = 4, N = 8 ------------------------------------------

// Figure 3 (top): 1F1B's warm-up of D-r-1 forwards; rank r's W runs r steady
// iterations after its I ("delay W by rank", the zb-h1 reference); the last
// rank reads 1 1 2 2 3 3 4 4 1 5 5 2 ... in the figure's 1-based numbering.
TEST(ZbH1, GoldenD4N8) {
  EXPECT_EQ(
      to_text(make("zb-h1", 4, 8)),
      "rank 0: F0.0 F0.1 F0.2 F0.3 I0.0 W0.0 F0.4 I0.1 W0.1 F0.5 I0.2 W0.2 F0.6 I0.3 W0.3 "
      "F0.7 I0.4 W0.4 I0.5 W0.5 I0.6 W0.6 I0.7 W0.7\n"
      "rank 1: F1.0 F1.1 F1.2 I1.0 F1.3 I1.1 W1.0 F1.4 I1.2 W1.1 F1.5 I1.3 W1.2 F1.6 I1.4 W1.3 "
      "F1.7 I1.5 W1.4 I1.6 W1.5 I1.7 W1.6 W1.7\n"
      "rank 2: F2.0 F2.1 I2.0 F2.2 I2.1 F2.3 I2.2 W2.0 F2.4 I2.3 W2.1 F2.5 I2.4 W2.2 F2.6 I2.5 "
      "W2.3 F2.7 I2.6 W2.4 I2.7 W2.5 W2.6 W2.7\n"
      "rank 3: F3.0 I3.0 F3.1 I3.1 F3.2 I3.2 F3.3 I3.3 W3.0 F3.4 I3.4 W3.1 F3.5 I3.5 W3.2 F3.6 "
      "I3.6 W3.3 F3.7 I3.7 W3.4 W3.5 W3.6 W3.7\n");
}

TEST(ZbH1, OneDeviceIsForwardInputWeightPerMicroBatch) {
  EXPECT_EQ(to_text(make("zb-h1", 1, 3)), "rank 0: F0.0 I0.0 W0.0 F0.1 I0.1 W0.1 F0.2 I0.2 W0.2\n");
}

// Figure 3 (bottom): 2(D-r)-1 warm-up forwards, steady I W F, the last 2r
// steady iterations without W, and those W after the final I.
TEST(ZbH2, GoldenD4N8) {
  EXPECT_EQ(
      to_text(make("zb-h2", 4, 8)),
      "rank 0: F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 I0.0 W0.0 F0.7 I0.1 W0.1 I0.2 W0.2 I0.3 W0.3 "
      "I0.4 W0.4 I0.5 W0.5 I0.6 W0.6 I0.7 W0.7\n"
      "rank 1: F1.0 F1.1 F1.2 F1.3 F1.4 I1.0 W1.0 F1.5 I1.1 F1.6 I1.2 F1.7 I1.3 W1.1 I1.4 W1.2 "
      "I1.5 W1.3 I1.6 W1.4 I1.7 W1.5 W1.6 W1.7\n"
      "rank 2: F2.0 F2.1 F2.2 I2.0 W2.0 F2.3 I2.1 F2.4 I2.2 F2.5 I2.3 F2.6 I2.4 F2.7 I2.5 W2.1 "
      "I2.6 W2.2 I2.7 W2.3 W2.4 W2.5 W2.6 W2.7\n"
      "rank 3: F3.0 I3.0 W3.0 F3.1 I3.1 F3.2 I3.2 F3.3 I3.3 F3.4 I3.4 F3.5 I3.5 F3.6 I3.6 F3.7 "
      "I3.7 W3.1 W3.2 W3.3 W3.4 W3.5 W3.6 W3.7\n");
}

// The authors' handcrafted get_zb_v_schedule(4, 8) (PyTorch's
// ScheduleZBVZeroBubble gives the same): rank r runs stage r (chunk 0) and
// stage 7-r (chunk 1).
TEST(ZbV, GoldenD4N8) {
  EXPECT_EQ(
      to_text(make("zb-v", 4, 8)),
      "rank 0: F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 F7.0 I7.0 W7.0 F7.1 I7.1 W7.1 F7.2 I7.2 W7.2 "
      "F7.3 I7.3 W7.3 F0.7 I0.0 W0.0 F7.4 I7.4 W7.4 I0.1 W0.1 F7.5 I7.5 W7.5 I0.2 W0.2 F7.6 "
      "I7.6 W7.6 I0.3 W0.3 F7.7 I7.7 W7.7 I0.4 W0.4 I0.5 W0.5 I0.6 W0.6 I0.7 W0.7\n"
      "rank 1: F1.0 F1.1 F1.2 F1.3 F1.4 F6.0 F1.5 F6.1 I6.0 W6.0 F6.2 I6.1 W6.1 F6.3 I6.2 W6.2 "
      "F1.6 I1.0 W1.0 F6.4 I6.3 W6.3 F1.7 I1.1 W1.1 F6.5 I6.4 W6.4 I1.2 W1.2 F6.6 I6.5 W6.5 "
      "I1.3 W1.3 F6.7 I6.6 W6.6 I1.4 I6.7 I1.5 W1.4 I1.6 W1.5 I1.7 W1.6 W6.7 W1.7\n"
      "rank 2: F2.0 F2.1 F2.2 F5.0 F2.3 F5.1 F2.4 F5.2 I5.0 W5.0 F5.3 I5.1 W5.1 F2.5 I2.0 W2.0 "
      "F5.4 I5.2 W5.2 F2.6 I2.1 W2.1 F5.5 I5.3 W5.3 F2.7 I2.2 W2.2 F5.6 I5.4 W5.4 I2.3 W2.3 "
      "F5.7 I5.5 W5.5 I2.4 I5.6 I2.5 I5.7 I2.6 W2.4 I2.7 W2.5 W5.6 W5.7 W2.6 W2.7\n"
      "rank 3: F3.0 F4.0 F3.1 F4.1 F3.2 F4.2 F3.3 F4.3 I4.0 W4.0 F3.4 I3.0 W3.0 F4.4 I4.1 W4.1 "
      "F3.5 I3.1 W3.1 F4.5 I4.2 W4.2 F3.6 I3.2 W3.2 F4.6 I4.3 W4.3 F3.7 I3.3 W3.3 F4.7 I4.4 "
      "W4.4 I3.4 I4.5 I3.5 I4.6 I3.6 I4.7 I3.7 W3.4 W4.5 W4.6 W4.7 W3.5 W3.6 W3.7\n");
}

// ---- Structure -------------------------------------------------------------

// ZB-H1 keeps 1F1B's order of forwards and input gradients: drop the W and
// read I as B, and it is Megatron's 1F1B.
TEST(ZbH1, IsOneFOneBWithWeightGradientsDeferred) {
  for (int d : kDevices)
    for (int n : {d, 2 * d + 1}) {
      const Schedule zb = make("zb-h1", d, n), ofob = make("1f1b", d, n);
      for (int r = 0; r < d; ++r) {
        std::vector<Action> fb;
        for (Action a : zb.ranks[r]) {
          if (a.task.op == Op::W) continue;
          if (a.task.op == Op::I) a.task.op = Op::B;
          fb.push_back(a);
        }
        EXPECT_EQ(fb, ofob.ranks[r]) << "D=" << d << " N=" << n << " rank " << r;
      }
    }
}

// The reference builds ZB-V for max(N, 2D-1) micro-batches and drops the
// passes of the padding ones.
TEST(ZbV, FewMicroBatchesDropThePadding) {
  for (int d : {2, 3, 4, 8})
    for (int n = 1; n < 2 * d - 1; ++n) {
      const Schedule full = make("zb-v", d, 2 * d - 1), small = make("zb-v", d, n);
      for (int r = 0; r < d; ++r) {
        std::vector<Action> kept;
        for (const auto& a : full.ranks[r])
          if (a.task.mb < n) kept.push_back(a);
        EXPECT_EQ(small.ranks[r], kept) << "D=" << d << " N=" << n << " rank " << r;
      }
    }
}

TEST(ZeroBubble, Validates) {
  for (int d : kDevices) {
    for (int n : microbatches(d, d))
      EXPECT_NO_THROW(validate(make("zb-h1", d, n))) << d << " " << n;
    for (int n : microbatches(2 * d - 1, d))
      EXPECT_NO_THROW(validate(make("zb-h2", d, n))) << d << " " << n;
    for (int n : microbatches(1, 2 * d))
      EXPECT_NO_THROW(validate(make("zb-v", d, n))) << d << " " << n;
  }
  EXPECT_NO_THROW(validate(make("zb-h1", 1, 1)));
  EXPECT_NO_THROW(validate(make("zb-h2", 1, 1)));
  EXPECT_NO_THROW(validate(make("zb-v", 1, 1)));
  EXPECT_TRUE(make("zb-h1", 4, 8).splits_backward());
  EXPECT_EQ(make("zb-v", 4, 8).stages(), 8);
}

// ---- Bubbles against the simulator -----------------------------------------

// ZB-H1: every rank idles exactly (D-1)(F+I-W) of the makespan for any N >= D
// when W <= F and W <= I; a larger W no longer fits the gaps it is moved to.
TEST(ZbH1, IdleIsDMinusOneTimesFPlusIMinusW) {
  const StageCost costs[] = {stage_cost(1, 1, 1), stage_cost(2, 2, 1), stage_cost(1, 2, 1),
                             stage_cost(2, 1, 0.5), stage_cost(3, 2, 2)};
  for (const auto& c : costs)
    for (int d : kDevices)
      for (int n : microbatches(d, d)) {
        const auto r = simulate_uniform({"zb-h1", d, n}, c);
        const auto cf = closed_form(r.schedule.params, testing::uniform(c));
        const std::string at = where("zb-h1", d, n, c);
        for (const auto& rk : r.metrics.ranks)
          EXPECT_NEAR(rk.idle, (d - 1) * (c.f + c.i - c.w), 1e-9) << at;
        ASSERT_TRUE(cf.idle_per_rank && cf.bubble_fraction) << at;
        EXPECT_NEAR(*cf.idle_per_rank, (d - 1) * (c.f + c.i - c.w), 1e-9) << at;
        EXPECT_NEAR(*cf.bubble_fraction, r.metrics.bubble_fraction, 1e-9) << at;
      }
}

TEST(ZbH1, ClosedFormOnlyWhenWeightGradientIsSmallest) {
  struct Case {
    StageCost c;
    double formula, simulated;
  };
  const Case cases[] = {{stage_cost(1, 1, 2), 0, 3}, {stage_cost(1, 2, 2), 3, 6}};
  for (const auto& k : cases) {
    const auto r = simulate_uniform({"zb-h1", 4, 8}, k.c);
    EXPECT_NEAR(3 * (k.c.f + k.c.i - k.c.w), k.formula, 1e-9);
    EXPECT_NEAR(r.metrics.ranks[0].idle, k.simulated, 1e-9);
    EXPECT_FALSE(closed_form(r.schedule.params, testing::uniform(k.c)).idle_per_rank);
  }
}

// ZB-H2: with W <= F and 2W <= I every rank idles exactly (D-1)(F+I-2W) of
// the makespan, for any N >= 2D-1.
TEST(ZbH2, IdleIsDMinusOneTimesFPlusIMinusTwoW) {
  const StageCost costs[] = {stage_cost(2, 2, 1), stage_cost(1, 2, 1), stage_cost(1, 3, 1),
                             stage_cost(2, 3, 0.5)};
  for (const auto& c : costs)
    for (int d : kDevices)
      for (int n : microbatches(2 * d - 1, d)) {
        const auto r = simulate_uniform({"zb-h2", d, n}, c);
        const auto cf = closed_form(r.schedule.params, testing::uniform(c));
        const std::string at = where("zb-h2", d, n, c);
        for (const auto& rk : r.metrics.ranks)
          EXPECT_NEAR(rk.idle, (d - 1) * (c.f + c.i - 2 * c.w), 1e-9) << at;
        ASSERT_TRUE(cf.idle_per_rank && cf.bubble_fraction) << at;
        EXPECT_NEAR(*cf.idle_per_rank, (d - 1) * (c.f + c.i - 2 * c.w), 1e-9) << at;
        EXPECT_NEAR(*cf.bubble_fraction, r.metrics.bubble_fraction, 1e-9) << at;
      }
}

// The paper's (D-1)(F+I-2W) is the idle inside a rank's own span, exact for
// W <= F and 2W <= F+I; zero inside every span when F = I = W. The layout is
// a parallelogram, so of the makespan each rank idles (D-1)(F + max(I-2W, 0)).
TEST(ZbH2, ZeroBubbleWithinEachRanksSpan) {
  const StageCost costs[] = {stage_cost(1, 1, 1), stage_cost(2, 2, 2), stage_cost(2, 1, 1),
                             stage_cost(3, 2, 2), stage_cost(2, 2, 1.5)};
  for (const auto& c : costs)
    for (int d : kDevices)
      for (int n : microbatches(2 * d - 1, d)) {
        const auto r = simulate_uniform({"zb-h2", d, n}, c);
        const auto cf = closed_form(r.schedule.params, testing::uniform(c));
        const std::string at = where("zb-h2", d, n, c);
        const double paper = (d - 1) * (c.f + c.i - 2 * c.w);
        EXPECT_NEAR(r.metrics.ranks[0].span_idle, paper, 1e-9) << at;
        const double span = r.metrics.ranks[0].last_end - r.metrics.ranks[0].first_start;
        EXPECT_NEAR(r.metrics.zb_bubble_rate, paper / span, 1e-9) << at;
        if (c.f == c.i && c.i == c.w) {
          for (const auto& rk : r.metrics.ranks) EXPECT_NEAR(rk.span_idle, 0, 1e-9) << at;
        }
        const double makespan_idle = (d - 1) * (c.f + std::max(c.i - 2 * c.w, 0.0));
        for (const auto& rk : r.metrics.ranks) EXPECT_NEAR(rk.idle, makespan_idle, 1e-9) << at;
        ASSERT_TRUE(cf.bubble_fraction) << at;
        EXPECT_NEAR(*cf.bubble_fraction, r.metrics.bubble_fraction, 1e-9) << at;
        EXPECT_EQ(cf.idle_per_rank.has_value(), 2 * c.w <= c.i) << at;
      }
}

// ZB-V: zero idle inside every rank's span when F = I = W and N >= 2D-1; of
// the makespan each rank idles the (D-1)F by which the ranks start apart.
TEST(ZbV, ZeroBubbleWhenForwardInputAndWeightCostTheSame) {
  for (double t : {1.0, 2.5})
    for (int d : kDevices)
      for (int n : microbatches(2 * d - 1, d)) {
        const StageCost c = stage_cost(t, t, t);
        const auto r = simulate_uniform({"zb-v", d, n}, c);
        const auto cf = closed_form(r.schedule.params, testing::uniform(c));
        const std::string at = where("zb-v", d, n, c);
        EXPECT_NEAR(r.metrics.zb_bubble_rate, 0, 1e-12) << at;
        for (const auto& rk : r.metrics.ranks) {
          EXPECT_NEAR(rk.span_idle, 0, 1e-9) << at;
          EXPECT_NEAR(rk.idle, (d - 1) * t, 1e-9) << at;
        }
        ASSERT_TRUE(cf.idle_per_rank && cf.bubble_fraction) << at;
        EXPECT_NEAR(*cf.idle_per_rank, (d - 1) * t, 1e-9) << at;
        EXPECT_NEAR(*cf.bubble_fraction, r.metrics.bubble_fraction, 1e-9) << at;
      }
}

TEST(ZbV, BubblesBelowTwoDMinusOneMicroBatches) {
  for (int d : {2, 4, 8})
    for (int n = 1; n < 2 * d - 1; ++n) {
      const StageCost c = stage_cost(1, 1, 1);
      const auto r = simulate_uniform({"zb-v", d, n}, c);
      EXPECT_GT(r.metrics.zb_bubble_rate, 0.01) << "D=" << d << " N=" << n;
      EXPECT_FALSE(closed_form(r.schedule.params, testing::uniform(c)).bubble_fraction);
    }
}

// ---- Memory ----------------------------------------------------------------

TEST(ZeroBubble, PeakActivationsD4N8) {
  const StageCost c = stage_cost(1, 1, 1);
  const std::vector<int> h1 = {4, 4, 4, 4}, h2 = {7, 7, 7, 7}, v = {8, 8, 8, 8};
  for (const auto& [name, want] : {std::pair{"zb-h1", h1}, {"zb-h2", h2}, {"zb-v", v}}) {
    const auto r = simulate_uniform({name, 4, 8}, c);
    std::vector<int> got;
    for (const auto& rk : r.metrics.ranks) got.push_back(rk.peak_activations);
    EXPECT_EQ(got, want) << name;
  }
}

// Rank 0 holds D (ZB-H1, as 1F1B), 2D-1 (ZB-H2) and 2D chunk activations, D
// whole-stage equivalents (ZB-V); with these orders every rank peaks there.
TEST(ZeroBubble, PeakActivationsMatchClosedForm) {
  const StageCost c = stage_cost(2, 2, 1);
  for (int d : kDevices) {
    struct Case {
      const char* name;
      int least, peak;
    };
    for (const Case& k :
         {Case{"zb-h1", d, d}, Case{"zb-h2", 2 * d - 1, 2 * d - 1}, Case{"zb-v", 2 * d - 1, 2 * d}})
      for (int n : microbatches(k.least, d)) {
        const auto r = simulate_uniform({k.name, d, n}, c);
        const auto cf = closed_form(r.schedule.params, testing::uniform(c));
        ASSERT_TRUE(cf.peak_activations);
        EXPECT_EQ(*cf.peak_activations, k.peak) << k.name;
        for (const auto& rk : r.metrics.ranks)
          EXPECT_EQ(rk.peak_activations, k.peak)
              << k.name << " D=" << d << " N=" << n << " r" << rk.rank;
        if (std::string(k.name) == "zb-v") {
          // 2D chunks of 1/(2D) of the model each: one whole micro-batch, as 1F1B's rank 0.
          EXPECT_NEAR(r.metrics.ranks[0].peak_activation_share, 1.0, 1e-12);
        }
      }
  }
}

// With N < D, ZB-V drops the padding micro-batches: the warm-up holds both chunks of every one,
// 2N, and the closed form says so.
TEST(ZbV, PeakActivationsWithFewerMicroBatchesThanRanks) {
  const StageCost c = stage_cost(2, 2, 1);
  for (int d : kDevices)
    for (int n = 1; n < d; ++n) {
      const auto r = simulate_uniform({"zb-v", d, n}, c);
      const auto cf = closed_form(r.schedule.params, testing::uniform(c));
      ASSERT_TRUE(cf.peak_activations);
      EXPECT_EQ(*cf.peak_activations, 2 * n) << "D=" << d << " N=" << n;
      int peak = 0;
      for (const auto& rk : r.metrics.ranks) peak = std::max(peak, rk.peak_activations);
      EXPECT_EQ(peak, *cf.peak_activations) << "D=" << d << " N=" << n;
    }
}

// ---- Parameters ------------------------------------------------------------

TEST(ZeroBubble, RejectsWhatTheirDefinitionsDoNotAllow) {
  const ScheduleParams bad[] = {
      {"zb-h1", 4, 3, 0, 0},  {"zb-h1", 16, 15, 0, 0}, {"zb-h1", 0, 4, 0, 0}, {"zb-h1", 4, 0, 0, 0},
      {"zb-h1", 4, 8, 2, 0},  {"zb-h1", 4, 8, 0, 4},   {"zb-h2", 4, 6, 0, 0}, {"zb-h2", 2, 2, 0, 0},
      {"zb-h2", 8, 14, 0, 0}, {"zb-h2", 0, 4, 0, 0},   {"zb-h2", 4, 8, 2, 0}, {"zb-v", 0, 4, 0, 0},
      {"zb-v", 4, 0, 0, 0},   {"zb-v", 4, -1, 0, 0},   {"zb-v", 4, 8, 2, 0},  {"zb-v", 4, 8, 0, 4},
  };
  for (const auto& p : bad)
    EXPECT_THROW(generate(p), UsageError)
        << p.name << " D=" << p.devices << " N=" << p.microbatches;
  // The generators check their own rules when called directly, too.
  EXPECT_THROW(generate_zb_h1({"zb-h1", 0, 4, 0, 0}), UsageError);
  EXPECT_THROW(generate_zb_h2({"zb-h2", 0, 4, 0, 0}), UsageError);
  EXPECT_THROW(generate_zb_v({"zb-v", 0, 4, 0, 0}), UsageError);
  EXPECT_THROW(generate_zb_v({"zb-v", 4, 0, 0, 0}), UsageError);
}

TEST(ZeroBubble, MessagesNameTheBadValue) {
  auto message = [](const ScheduleParams& p) -> std::string {
    try {
      generate(p);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  const std::string h1 = message({"zb-h1", 4, 3, 0, 0}), h2 = message({"zb-h2", 4, 6, 0, 0});
  EXPECT_NE(h1.find("N=3"), std::string::npos) << h1;
  EXPECT_NE(h1.find("N >= D"), std::string::npos) << h1;
  EXPECT_NE(h2.find("N=6"), std::string::npos) << h2;
  EXPECT_NE(h2.find("N >= 2D-1"), std::string::npos) << h2;
  EXPECT_EQ(h1.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace ppbench
