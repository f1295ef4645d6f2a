// Chimera (Li & Hoefler, SC'21): the per-rank order of the authors' runtime,
// its soundness, the paper's bubble and memory claims, and its parameter rules.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cost_model.h"
#include "harness/metrics.h"
#include "harness/simulator.h"
#include "schedules/formulas.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace ppbench {
namespace {

Schedule chimera(int d, int n) { return generate({"chimera", d, n, 0, 0}); }

Metrics simulated(const Schedule& s, double f, double b) {
  StageCost c;
  c.f = f, c.b = b, c.i = b / 2, c.w = b / 2, c.fb = f + b, c.comm = 0;
  return compute_metrics(simulate(s, CostModel::uniform(s.stages(), c)), s.placement);
}

// The paper's Figure 3 (D = 4, N = 4). Stages 0-3 are the down pipeline, 4-7
// the up one (stage 4 on rank 3, stage 7 on rank 0); micro-batches count from 0
// in each. Rank 0 runs down stage 0 and up stage 3 (the up pipeline's last).
TEST(Chimera, GoldenD4N4) {
  EXPECT_EQ(to_text(chimera(4, 4)),
            "rank 0: F0.0 F0.1 F7.0 B7.0 F7.1 B7.1 B0.0 B0.1\n"
            "rank 1: F1.0 F6.0 F1.1 F6.1 B6.0 B1.0 B6.1 B1.1\n"
            "rank 2: F5.0 F2.0 F5.1 F2.1 B2.0 B5.0 B2.1 B5.1\n"
            "rank 3: F4.0 F4.1 F3.0 B3.0 F3.1 B3.1 B4.0 B4.1\n");
}

// Two basic units by direct concatenation: the second unit's forwards of the
// near pipeline alternate with the first unit's remaining backwards.
TEST(Chimera, GoldenD4N8) {
  EXPECT_EQ(to_text(chimera(4, 8)),
            "rank 0: F0.0 F0.1 F7.0 B7.0 F7.1 B7.1 B0.0 F0.2 B0.1 F0.3 F7.2 B7.2 F7.3 B7.3 B0.2 "
            "B0.3\n"
            "rank 1: F1.0 F6.0 F1.1 F6.1 B6.0 B1.0 B6.1 B1.1 F1.2 F6.2 F1.3 F6.3 B6.2 B1.2 B6.3 "
            "B1.3\n"
            "rank 2: F5.0 F2.0 F5.1 F2.1 B2.0 B5.0 B2.1 B5.1 F5.2 F2.2 F5.3 F2.3 B2.2 B5.2 B2.3 "
            "B5.3\n"
            "rank 3: F4.0 F4.1 F3.0 B3.0 F3.1 B3.1 B4.0 F4.2 B4.1 F4.3 F3.2 B3.2 F3.3 B3.3 B4.2 "
            "B4.3\n");
}

TEST(Chimera, ValidatesAndPlacesTwoStagesPerRank) {
  for (int d : {2, 4, 8, 16})
    for (int k : {1, 2, 4}) {
      const Schedule s = chimera(d, k * d);
      EXPECT_NO_THROW(validate(s)) << "D=" << d << " N=" << k * d;
      EXPECT_EQ(s.stages(), 2 * d);
      EXPECT_EQ(s.placement.chain_microbatches, (std::vector<int>{k * d / 2, k * d / 2}));
      for (const auto& actions : s.ranks) EXPECT_EQ(actions.size(), 2u * k * d);
    }
}

// With F = B every rank idles D/2-1 forward and D/2-1 backward slots, whatever
// the number of units: direct concatenation leaves no bubble between units.
TEST(Chimera, BubbleMatchesClosedFormWhenForwardEqualsBackward) {
  for (int d : {2, 4, 8, 16})
    for (int k : {1, 2, 4}) {
      const int n = k * d;
      const Metrics m = simulated(chimera(d, n), 1, 1);
      const double expected = (d - 2.0) / (d - 2.0 + 2.0 * n);
      EXPECT_NEAR(m.bubble_fraction, expected, 1e-9) << "D=" << d << " N=" << n;
      EXPECT_NEAR(m.makespan, 2.0 * n + d - 2, 1e-9) << "D=" << d << " N=" << n;

      const ClosedForm cf = closed_form({"chimera", d, n, 0, 0}, UniformCost{1, 1, 0.5, 0.5, 2});
      ASSERT_TRUE(cf.bubble_fraction.has_value());
      EXPECT_NEAR(*cf.bubble_fraction, m.bubble_fraction, 1e-9) << "D=" << d << " N=" << n;
      ASSERT_TRUE(cf.idle_per_rank.has_value());
      for (const auto& r : m.ranks) EXPECT_NEAR(r.idle, *cf.idle_per_rank, 1e-9);
    }
}

// F != B: the paper gives no figure. Measured here: each of the N/D units
// stretches the bubble, idle per rank = (D-2)(k max(F,B) - (k-1) min(F,B)),
// k = N/D; one unit idles (D-2)B when B = 2F, not (D/2-1)(F+B). The
// intermediate bubbles are the paper's reason for forward doubling.
TEST(Chimera, BackwardTwiceForwardStretchesTheBubble) {
  for (int d : {4, 8, 16})
    for (int k : {1, 2, 4}) {
      const int n = k * d;
      const Metrics m = simulated(chimera(d, n), 1, 2);
      const double idle = (d - 2.0) * (k * 2.0 - (k - 1) * 1.0);
      for (const auto& r : m.ranks) EXPECT_NEAR(r.idle, idle, 1e-9) << "D=" << d << " N=" << n;
      EXPECT_GT(m.bubble_fraction, (d - 2.0) / (d - 2.0 + 2.0 * n) + 1e-9);
      const ClosedForm cf = closed_form({"chimera", d, n, 0, 0}, UniformCost{1, 2, 1, 1, 3});
      EXPECT_FALSE(cf.bubble_fraction.has_value());
      EXPECT_FALSE(cf.idle_per_rank.has_value());
    }
}

// Peak in-flight (stage, mb) activations per rank lie between D/2+1 and D.
TEST(Chimera, PeakActivationsBetweenHalfPlusOneAndD) {
  for (int d : {2, 4, 8, 16})
    for (int k : {1, 2, 4}) {
      const Metrics m = simulated(chimera(d, k * d), 1, 1);
      for (const auto& r : m.ranks) {
        EXPECT_GE(r.peak_activations, d / 2 + 1) << "D=" << d << " rank " << r.rank;
        EXPECT_LE(r.peak_activations, d) << "D=" << d << " rank " << r.rank;
      }
    }
  // The ends of the pipelines hold the least, the middle ranks the most.
  std::vector<int> peaks;
  for (const auto& r : simulated(chimera(4, 4), 1, 1).ranks) peaks.push_back(r.peak_activations);
  EXPECT_EQ(peaks, (std::vector<int>{3, 4, 4, 3}));
  peaks.clear();
  for (const auto& r : simulated(chimera(8, 8), 1, 2).ranks) peaks.push_back(r.peak_activations);
  EXPECT_EQ(peaks, (std::vector<int>{5, 6, 7, 8, 8, 7, 6, 5}));
  for (int d : {2, 4, 8, 16})
    EXPECT_EQ(closed_form({"chimera", d, 2 * d, 0, 0}, UniformCost{}).peak_activations,
              simulated(chimera(d, 2 * d), 1, 2).peak_activations);
}

TEST(Chimera, RejectsWhatThePaperDoesNotDefine) {
  for (auto [d, n] :
       {std::pair{1, 2}, {3, 6}, {5, 10}, {4, 2}, {4, 6}, {4, 10}, {8, 12}, {2, 1}, {2, 3}})
    EXPECT_THROW(chimera(d, n), UsageError) << "D=" << d << " N=" << n;
  EXPECT_THROW(generate({"chimera", 4, 8, 2, 0}), UsageError);  // no --chunks
  EXPECT_THROW(generate_chimera({"chimera", 4, 0, 0, 0}), UsageError);
  // One line that names the bad value.
  for (auto [d, n, bad] : {std::tuple{3, 6, "D=3"}, {4, 6, "N=6"}}) {
    try {
      chimera(d, n);
      ADD_FAILURE() << "no throw for D=" << d << " N=" << n;
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(bad), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

// Forward doubling, as the authors' runtime orders it
// (main_with_runtime_forward_doubling.py): on rank r, a = D/2 - (position in near),
// b = D/2 - a; a x [FF near], b x [FF far, FF near], a x [FF far, B far],
// (b + D/2) x [B near, B far], then a x B near. Written out by hand for D = 4.
Schedule chimera_doubling(int d, int n) { return generate({"chimera-doubling", d, n, 0, 0}); }

TEST(ChimeraDoubling, GoldenD4N8) {
  EXPECT_EQ(to_text(chimera_doubling(4, 8)),
            "rank 0: F0.0 F0.1 F0.2 F0.3 F7.0 F7.1 B7.0 F7.2 F7.3 B7.1 B0.0 B7.2 B0.1 B7.3 B0.2 "
            "B0.3\n"
            "rank 1: F1.0 F1.1 F6.0 F6.1 F1.2 F1.3 F6.2 F6.3 B6.0 B1.0 B6.1 B1.1 B6.2 B1.2 B6.3 "
            "B1.3\n"
            "rank 2: F5.0 F5.1 F2.0 F2.1 F5.2 F5.3 F2.2 F2.3 B2.0 B5.0 B2.1 B5.1 B2.2 B5.2 B2.3 "
            "B5.3\n"
            "rank 3: F4.0 F4.1 F4.2 F4.3 F3.0 F3.1 B3.0 F3.2 F3.3 B3.1 B4.0 B3.2 B4.1 B3.3 B4.2 "
            "B4.3\n");
}

// Two doubled units on D = 2: the second opens with B(near) before its doubled forward, as the
// reference's doubling steps after the first do.
TEST(ChimeraDoubling, GoldenD2N8) {
  EXPECT_EQ(to_text(chimera_doubling(2, 8)),
            "rank 0: F0.0 F0.1 F3.0 F3.1 B3.0 B0.0 B3.1 B0.1 F0.2 F0.3 F3.2 F3.3 B3.2 B0.2 B3.3 "
            "B0.3\n"
            "rank 1: F2.0 F2.1 F1.0 F1.1 B1.0 B2.0 B1.1 B2.1 F2.2 F2.3 F1.2 F1.3 B1.2 B2.2 B1.3 "
            "B2.3\n");
}

// The authors' runtime (Shigangli/Chimera main_with_runtime_direct.py and
// main_with_runtime_forward_doubling.py) in its own terms, as a second derivation of both
// orders: each rank runs `r` (the down pipeline, its stage r.stage = rank) and `r_reverse` (the
// up one); schedule numbers a = half - stage, folded to -a + 1 when not positive, b = half - a,
// c = b (direct) or b + half (doubling); a first-half rank puts r_reverse's forward before r's
// in phase 2 and r's backward before r_reverse's in phase 4, a second-half rank the other way
// round. run_forward takes a pipeline's next micro-batch and run_backward its oldest.
std::string runtime_order(int d, int n, bool doubling) {
  const int half = d / 2, forwards_per_call = doubling ? 2 : 1;
  const int steps = doubling ? n / (2 * d) : n / d;
  std::vector<int> next_f(2 * d, 0), next_b(2 * d, 0);
  std::string text;
  for (int rank = 0; rank < d; ++rank) {
    const int stage = rank;
    const bool first_half = stage / half == 0;
    int a = half - stage;
    if (a <= 0) a = -a + 1;
    const int b = half - a, c = doubling ? b + half : b;
    const int r = rank, r_reverse = 2 * d - 1 - rank;  // ppbench's ids of the two stages
    std::string line = "rank " + std::to_string(rank) + ":";
    auto run_forward = [&](int pipe) {
      for (int k = 0; k < forwards_per_call; ++k)
        line += " F" + std::to_string(pipe) + "." + std::to_string(next_f[pipe]++);
    };
    auto run_backward = [&](int pipe) {
      line += " B" + std::to_string(pipe) + "." + std::to_string(next_b[pipe]++);
    };
    const int mine = first_half ? r : r_reverse, other = first_half ? r_reverse : r;
    for (int step = 0; step < steps; ++step) {
      for (int i = 0; i < a; ++i) {
        if (step > 0) run_backward(mine);
        run_forward(mine);
      }
      for (int i = 0; i < b; ++i) {
        if (first_half)
          run_forward(r_reverse), run_forward(r);
        else
          run_forward(r), run_forward(r_reverse);
      }
      for (int i = 0; i < a; ++i) run_forward(other), run_backward(other);
      for (int i = 0; i < c; ++i) {
        if (first_half)
          run_backward(r), run_backward(r_reverse);
        else
          run_backward(r_reverse), run_backward(r);
      }
    }
    for (int i = 0; i < a; ++i) run_backward(mine);
    text += line + "\n";
  }
  return text;
}

TEST(Chimera, EqualsTheAuthorsRuntimeForEveryEvenDepth) {
  for (int d = 2; d <= 16; d += 2)
    for (int units = 1; units <= 3; ++units) {
      EXPECT_EQ(to_text(chimera(d, units * d)), runtime_order(d, units * d, false))
          << "D=" << d << " N=" << units * d;
      EXPECT_EQ(to_text(chimera_doubling(d, 2 * units * d)), runtime_order(d, 2 * units * d, true))
          << "doubling D=" << d << " N=" << 2 * units * d;
    }
}

TEST(ChimeraDoubling, ValidatesWithEveryMicroBatchOnce) {
  for (int d : {2, 4, 8, 16})
    for (int k : {1, 2, 3}) {
      const int n = 2 * k * d;
      const Schedule s = chimera_doubling(d, n);
      EXPECT_NO_THROW(validate(s)) << "D=" << d << " N=" << n;
      EXPECT_EQ(s.placement.chain_microbatches, (std::vector<int>{n / 2, n / 2}));
      for (const auto& actions : s.ranks) EXPECT_EQ(actions.size(), 2u * n);
    }
}

// The point of doubling: where a backward costs two forwards, a doubled forward fills a backward's
// slot, and the step is shorter than direct concatenation's at the same D and N, at the price of
// more activations in flight.
TEST(ChimeraDoubling, ShorterThanDirectConcatenationWhenBackwardIsTwiceForward) {
  for (int d : {4, 8, 16})
    for (int k : {1, 2}) {
      const int n = 2 * k * d;
      const Metrics doubled = simulated(chimera_doubling(d, n), 1, 2);
      const Metrics direct = simulated(chimera(d, n), 1, 2);
      EXPECT_LT(doubled.makespan, direct.makespan) << "D=" << d << " N=" << n;
      EXPECT_GT(doubled.peak_activations, direct.peak_activations) << "D=" << d << " N=" << n;
    }
  // With D = 2 neither leaves a bubble.
  EXPECT_DOUBLE_EQ(simulated(chimera_doubling(2, 8), 1, 2).bubble_fraction, 0.0);
}

TEST(ChimeraDoubling, RejectsWhatTheRuntimeDoesNotRun) {
  for (auto [d, n] : {std::pair{3, 12}, {4, 4}, {4, 12}, {8, 8}, {8, 24}, {2, 2}, {2, 6}})
    EXPECT_THROW(chimera_doubling(d, n), UsageError) << "D=" << d << " N=" << n;
  try {
    chimera_doubling(4, 12);
    ADD_FAILURE() << "no throw for D=4 N=12";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("N=12"), std::string::npos) << what;
    EXPECT_NE(what.find("2 x --devices"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_THROW(generate({"chimera-doubling", 4, 8, 2, 0}), UsageError);  // no --chunks
}

}  // namespace
}  // namespace ppbench
