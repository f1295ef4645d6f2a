// Closed forms (docs/schedules.md) against the simulator for the one-stage-per-
// rank families and Megatron's interleaving, exactly, over D in {2,4,8,16}.
#include <gtest/gtest.h>

#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::simulate_uniform;
using testing::stage_cost;

const int kDevices[] = {2, 4, 8, 16};
const StageCost kCosts[] = {stage_cost(1, 1, 1), stage_cost(1, 2, 1), stage_cost(2, 1, 0.5),
                            stage_cost(1, 0.5, 0.5)};

TEST(ClosedForm, NaiveIsOneRankAtATime) {
  for (int d : kDevices)
    for (int n : {1, 3, 8})
      for (const auto& c : kCosts) {
        auto r = simulate_uniform({"naive", d, n}, c);
        EXPECT_NEAR(r.metrics.bubble_fraction, (d - 1.0) / d, 1e-12) << d << " " << n;
        EXPECT_NEAR(r.metrics.makespan, n * d * (c.f + c.b), 1e-9);
        for (const auto& rk : r.metrics.ranks) EXPECT_EQ(rk.peak_activations, 1);
      }
}

TEST(ClosedForm, GPipeAndOneFOneB) {
  for (const char* name : {"gpipe", "1f1b"})
    for (int d : kDevices)
      for (int n = d; n <= 4 * d + 3; n += (n < 2 * d ? 1 : d)) {
        for (const auto& c : kCosts) {
          auto r = simulate_uniform({name, d, n}, c);
          const double expected = (d - 1.0) / (d - 1.0 + n);
          EXPECT_NEAR(r.metrics.bubble_fraction, expected, 1e-12)
              << name << " D=" << d << " N=" << n;
          EXPECT_NEAR(r.metrics.bubble_ratio, (d - 1.0) / n, 1e-12);
          for (const auto& rk : r.metrics.ranks) EXPECT_NEAR(rk.idle, (d - 1) * (c.f + c.b), 1e-9);
          auto cf = closed_form(r.schedule.params, testing::uniform(c));
          ASSERT_TRUE(cf.bubble_fraction);
          EXPECT_NEAR(*cf.bubble_fraction, r.metrics.bubble_fraction, 1e-12);
        }
      }
}

TEST(ClosedForm, GPipeAllowsFewerMicroBatchesThanDevices) {
  for (int d : kDevices)
    for (int n = 1; n < d; ++n) {
      auto r = simulate_uniform({"gpipe", d, n}, stage_cost(1, 1, 1));
      EXPECT_NEAR(r.metrics.bubble_fraction, (d - 1.0) / (d - 1.0 + n), 1e-12);
    }
}

TEST(PeakActivations, GPipeHoldsAllMicroBatchesOneFOneBHoldsDMinusR) {
  for (int d : kDevices)
    for (int n : {d, 2 * d + 1}) {
      auto gpipe = simulate_uniform({"gpipe", d, n}, stage_cost(1, 1, 1));
      auto ofob = simulate_uniform({"1f1b", d, n}, stage_cost(1, 1, 1));
      for (int r = 0; r < d; ++r) {
        EXPECT_EQ(gpipe.metrics.ranks[r].peak_activations, n);
        EXPECT_EQ(ofob.metrics.ranks[r].peak_activations, one_f_one_b_peak(d, r)) << d << " r" << r;
      }
    }
}

TEST(PeakActivations, SeedsMemoryExampleAtFourDevicesEightMicroBatches) {
  // The textbook example's figures: naive 1/4 A per GPU, GPipe 8/4 A, 1F1B 4/4 A.
  const auto c = stage_cost(1, 1, 1);
  EXPECT_DOUBLE_EQ(simulate_uniform({"naive", 4, 8}, c).metrics.ranks[0].peak_activation_share,
                   0.25);
  EXPECT_DOUBLE_EQ(simulate_uniform({"gpipe", 4, 8}, c).metrics.ranks[0].peak_activation_share,
                   2.0);
  EXPECT_DOUBLE_EQ(simulate_uniform({"1f1b", 4, 8}, c).metrics.ranks[0].peak_activation_share, 1.0);
}

TEST(ClosedForm, InterleavedOneFOneB) {
  for (int d : kDevices)
    for (int v : {2, 3, 4})
      for (int n : {d, 2 * d, 3 * d, 4 * d})
        for (const auto& c : kCosts) {
          ScheduleParams p{"interleaved-1f1b", d, n, v, 0};
          auto r = simulate_uniform(p, c);
          EXPECT_NEAR(r.metrics.bubble_fraction, (d - 1.0) / (d - 1.0 + v * n), 1e-12)
              << "D=" << d << " v=" << v << " N=" << n;
          // Megatron's bubble/ideal = (1/v)(D-1)/N.
          EXPECT_NEAR(r.metrics.bubble_ratio, (d - 1.0) / (v * n), 1e-12);
          EXPECT_EQ(r.schedule.stages(), v * d);
          const ClosedForm cf = closed_form(r.schedule.params, testing::uniform(c));
          ASSERT_TRUE(cf.bubble_fraction);
          EXPECT_NEAR(*cf.bubble_fraction, r.metrics.bubble_fraction, 1e-12);
          EXPECT_TRUE(cf.note.empty());
        }
}

TEST(ClosedForm, InterleavedWithAShortLastGroupHasNoClosedFormAndSaysWhy) {
  // D = 4, N = 6, default g = D: the simulator's 0.345 is not (D-1)/(D-1+vN) = 0.2.
  const auto r = simulate_uniform({"interleaved-1f1b", 4, 6, 2, 0}, stage_cost(1, 1, 1));
  const ClosedForm cf = closed_form(r.schedule.params, testing::uniform(stage_cost(1, 1, 1)));
  EXPECT_FALSE(cf.bubble_fraction);
  EXPECT_FALSE(cf.idle_per_rank);
  EXPECT_NE(cf.note.find("--group-size 6"), std::string::npos) << cf.note;
  EXPECT_GT(r.metrics.bubble_fraction, 0.3);
  // The note's claim: at N = 3D + 1 the default group size is worse than plain 1F1B, and one
  // group of all N micro-batches is not.
  const int d = 4, n = 3 * d + 1;
  const double interleaved = simulate_uniform({"interleaved-1f1b", d, n, 2, 0}, stage_cost(1, 1, 1))
                                 .metrics.bubble_fraction;
  const double one_group = simulate_uniform({"interleaved-1f1b", d, n, 2, n}, stage_cost(1, 1, 1))
                               .metrics.bubble_fraction;
  const double plain =
      simulate_uniform({"1f1b", d, n}, stage_cost(1, 1, 1)).metrics.bubble_fraction;
  EXPECT_GT(interleaved, plain);
  EXPECT_LT(one_group, plain);
  EXPECT_FALSE(closed_form({"interleaved-1f1b", d, n, 2, 0}, {}).note.empty());
  EXPECT_TRUE(closed_form({"interleaved-1f1b", d, n, 2, n}, {}).note.empty());
}

TEST(Registry, EveryFamilyHasItsGeneratorAndClosedForm) {
  for (const ScheduleInfo& s : all_schedules()) {
    EXPECT_NE(s.generate, nullptr) << s.name;
    EXPECT_NE(s.closed_form, nullptr) << s.name;
    EXPECT_FALSE(s.source.empty()) << s.name;
    EXPECT_FALSE(s.layout.empty()) << s.name;
    EXPECT_FALSE(s.closed_form({std::string(s.name), 4, 16, 0, 0}, {}).bubble_formula.empty())
        << s.name;
  }
}

// The memory estimates count three tasks per (stage, micro-batch) where the registry says the
// backward is split (harness/memory_estimate.h), before anything is generated: the registry's
// word must be what each generator writes.
TEST(Registry, SaysWhichFamiliesSplitTheBackward) {
  for (const ScheduleInfo& s : all_schedules()) {
    const Schedule g = generate({std::string(s.name), 4, 16, s.uses_chunks ? 2 : 0, 0});
    EXPECT_EQ(s.backward == Backward::kSplit, g.splits_backward()) << s.name;
  }
}

TEST(Interleaved, MegatronWarmupCounts) {
  // Rank r runs (D-r-1)*2 + (v-1)*g forwards before its first backward.
  for (int d : {2, 4, 8})
    for (int v : {2, 3})
      for (int g : {d, d + 1}) {
        const int n = 3 * d;
        Schedule s = generate({"interleaved-1f1b", d, n, v, g});
        for (int r = 0; r < d; ++r) {
          int warm = 0;
          while (s.ranks[r][warm].task.op == Op::F) ++warm;
          EXPECT_EQ(warm, std::min((d - r - 1) * 2 + (v - 1) * g + 1, n * v)) << d << v << g << r;
        }
      }
}

TEST(Interleaved, ChunkOrderFollowsMegatronScheduleTable) {
  // D=2, v=2, N=4, g=2: table (mb, chunk) = (0,0)(1,0)(0,1)(1,1)(2,0)(3,0)(2,1)(3,1).
  Schedule s = generate({"interleaved-1f1b", 2, 4, 2, 0});
  EXPECT_EQ(
      to_text(s),
      "rank 0: F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3\n"
      "rank 1: F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 B1.2 B1.3\n");
}

TEST(Generators, RejectParametersTheirDefinitionsDoNotAllow) {
  EXPECT_THROW(generate({"1f1b", 4, 3}), UsageError);
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 8, 1, 0}), UsageError);
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 8, 2, 3}), UsageError);  // g < D
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 8, 2, 9}), UsageError);  // g > N
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 3, 2, 0}), UsageError);  // N < D
  // Without --group-size the message names the constraint the user set, not the default g.
  try {
    generate({"interleaved-1f1b", 4, 3, 2, 0});
    FAIL() << "N < D was accepted";
  } catch (const UsageError& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find("needs N >= D"), std::string::npos) << why;
    EXPECT_EQ(why.find("--group-size"), std::string::npos) << why;
  }
  EXPECT_THROW(generate({"gpipe", 4, 8, 2, 0}), UsageError);  // chunks on gpipe
  EXPECT_THROW(generate({"gpipe", 4, 8, 0, 4}), UsageError);  // group size on gpipe
  EXPECT_THROW(generate({"gpipe", 0, 8}), UsageError);
  EXPECT_THROW(generate({"gpipe", 4, 0}), UsageError);
  EXPECT_THROW(generate({"no-such", 4, 8}), UsageError);
  try {
    generate({"1f1b", 4, 3});
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("N=3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ppbench
