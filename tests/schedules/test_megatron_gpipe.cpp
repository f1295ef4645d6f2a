// Closed forms (docs/schedules.md) against the simulator for the one-stage-per-
// rank families and Megatron's interleaving, exactly, over D in {2,4,8,16}.
#include <algorithm>
#include <string>
#include <vector>

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

// PyTorch's ScheduleInterleaved1F1B order, ported from torch/distributed/pipelining/schedules.py
// (ScheduleInterleaved1F1B.__init__, _calculate_single_rank_operations, _get_warmup_ops with
// multiply_factor 2, _get_1f1b_rank_ops), idle slots (None) dropped; "" where PyTorch refuses N
// (not a multiple of rounds = max(1, N div D)). P = N / rounds; rank r runs
// min((v-1)P + 2(D-1-r), vN) forwards, then one F and one B while forwards remain, then the
// rest of the B. Op k's forward is for local stage (k div P) mod v, its backward (k - warmup)
// for v-1 - ((k - warmup) div P) mod v, and each stage counts its own micro-batches from 0.
std::string pytorch_interleaved_1f1b(int d, int n, int v) {
  const int rounds = std::max(1, n / d);
  if (n % rounds != 0) return "";
  const int per_round = n / rounds, total = v * n;
  std::string out;
  for (int r = 0; r < d; ++r) {
    std::vector<int> next_f(v * d, 0), next_b(v * d, 0);
    std::string line = "rank " + std::to_string(r) + ":";
    auto f = [&](int k) {
      const int stage = (k / per_round) % v * d + r;
      line += " F" + std::to_string(stage) + "." + std::to_string(next_f[stage]++);
    };
    auto b = [&](int j) {
      const int stage = (v - 1 - (j / per_round) % v) * d + r;
      line += " B" + std::to_string(stage) + "." + std::to_string(next_b[stage]++);
    };
    const int warmup = std::min((v - 1) * per_round + 2 * (d - 1 - r), total);
    for (int k = 0; k < warmup; ++k) f(k);
    for (int k = warmup; k < total; ++k) {
      f(k);
      b(k - warmup);
    }
    for (int j = total - warmup; j < total; ++j) b(j);
    out += line + "\n";
  }
  return out;
}

TEST(Interleaved, EqualsPyTorchWithItsRoundSizeAsTheGroupSize) {
  int compared = 0, by_default = 0;
  for (int d = 2; d <= 6; ++d)
    for (int n = 1; n <= 4 * d; ++n)
      for (int v : {2, 3}) {
        const std::string torch = pytorch_interleaved_1f1b(d, n, v);
        if (torch.empty()) continue;  // PyTorch refuses N (D = 4: N = 9, 13, 14, 15)
        const int per_round = n / std::max(1, n / d);
        EXPECT_EQ(to_text(generate({"interleaved-1f1b", d, n, v, per_round})), torch)
            << "D=" << d << " N=" << n << " v=" << v << " --group-size " << per_round;
        ++compared;
        // The default g (D, or N when N < D) is PyTorch's round size when N < D or D divides N.
        if (n < d || n % d == 0) {
          EXPECT_EQ(to_text(generate({"interleaved-1f1b", d, n, v, 0})), torch)
              << "D=" << d << " N=" << n << " v=" << v;
          ++by_default;
        }
      }
  EXPECT_EQ(compared, 118);
  EXPECT_EQ(by_default, 70);
}

// Orders printed by the port above of PyTorch's algorithm (and, for D = 4, N = 3, by a second,
// Python port of the same source), pasted unchanged: N < D, and N = 4 not a multiple of D = 3.
TEST(Interleaved, GoldenPyTorchOrders) {
  // One round of N = 3 < D micro-batches: the default group size is N.
  EXPECT_EQ(to_text(generate({"interleaved-1f1b", 4, 3, 2, 0})),
            "rank 0: F0.0 F0.1 F0.2 F4.0 F4.1 F4.2 B4.0 B4.1 B4.2 B0.0 B0.1 B0.2\n"
            "rank 1: F1.0 F1.1 F1.2 F5.0 F5.1 F5.2 B5.0 B5.1 B5.2 B1.0 B1.1 B1.2\n"
            "rank 2: F2.0 F2.1 F2.2 F6.0 F6.1 F6.2 B6.0 B6.1 B6.2 B2.0 B2.1 B2.2\n"
            "rank 3: F3.0 F3.1 F3.2 F7.0 B7.0 F7.1 B7.1 F7.2 B7.2 B3.0 B3.1 B3.2\n");
  EXPECT_EQ(to_text(generate({"interleaved-1f1b", 3, 2, 3, 0})),
            "rank 0: F0.0 F0.1 F3.0 F3.1 F6.0 F6.1 B6.0 B6.1 B3.0 B3.1 B0.0 B0.1\n"
            "rank 1: F1.0 F1.1 F4.0 F4.1 F7.0 F7.1 B7.0 B7.1 B4.0 B4.1 B1.0 B1.1\n"
            "rank 2: F2.0 F2.1 F5.0 F5.1 F8.0 B8.0 F8.1 B8.1 B5.0 B5.1 B2.0 B2.1\n");
  // D = 3, N = 4: PyTorch's one round of 4 is --group-size 4; Megatron's default g = 3 differs.
  const std::string torch =
      "rank 0: F0.0 F0.1 F0.2 F0.3 F3.0 F3.1 F3.2 F3.3 B3.0 B3.1 B3.2 B3.3 B0.0 B0.1 B0.2 B0.3\n"
      "rank 1: F1.0 F1.1 F1.2 F1.3 F4.0 F4.1 F4.2 B4.0 F4.3 B4.1 B4.2 B4.3 B1.0 B1.1 B1.2 B1.3\n"
      "rank 2: F2.0 F2.1 F2.2 F2.3 F5.0 B5.0 F5.1 B5.1 F5.2 B5.2 F5.3 B5.3 B2.0 B2.1 B2.2 B2.3\n";
  EXPECT_EQ(to_text(generate({"interleaved-1f1b", 3, 4, 2, 4})), torch);
  EXPECT_NE(to_text(generate({"interleaved-1f1b", 3, 4, 2, 0})), torch);
  EXPECT_EQ(generate({"interleaved-1f1b", 4, 3, 2, 0}).params.group_size, 3);
  EXPECT_EQ(generate({"interleaved-1f1b", 4, 8, 2, 0}).params.group_size, 4);
}

// A default order that deadlocks is refused in one line that names the group size that runs:
// PyTorch's N / max(1, N div D), or one group where PyTorch refuses N.
TEST(Interleaved, DeadlockNamesPyTorchsGroupSize) {
  auto message = [](int d, int n, int v) -> std::string {
    try {
      generate({"interleaved-1f1b", d, n, v, 0});
    } catch (const UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string d5n12 = message(5, 12, 2);
  EXPECT_NE(d5n12.find("deadlocks"), std::string::npos) << d5n12;
  EXPECT_NE(d5n12.find("--group-size 6 (PyTorch's"), std::string::npos) << d5n12;
  EXPECT_EQ(d5n12.find('\n'), std::string::npos) << d5n12;
  EXPECT_EQ(to_text(generate({"interleaved-1f1b", 5, 12, 2, 6})),
            pytorch_interleaved_1f1b(5, 12, 2));
  const std::string d4n5 = message(4, 5, 3);
  EXPECT_NE(d4n5.find("--group-size 5 (PyTorch's"), std::string::npos) << d4n5;
  // D = 4, N = 9: PyTorch refuses N = 9 (3 rounds do not divide it); one group of 9 runs.
  const std::string d4n9 = message(4, 9, 3);
  EXPECT_NE(d4n9.find("--group-size 9 (one group)"), std::string::npos) << d4n9;
  EXPECT_NO_THROW(generate({"interleaved-1f1b", 4, 9, 3, 9}));
}

TEST(ClosedForm, InterleavedWithOneGroupOfFewerThanDMicroBatches) {
  // g = N < D: GPipe over the vD stages, idle (D-1+(v-1)(D-N))(F+B).
  for (int d : {2, 4, 8})
    for (int n = 1; n < d; ++n)
      for (int v : {2, 3})
        for (const auto& c : kCosts) {
          const auto r = simulate_uniform({"interleaved-1f1b", d, n, v, 0}, c);
          const ClosedForm cf = closed_form(r.schedule.params, testing::uniform(c));
          ASSERT_TRUE(cf.bubble_fraction) << cf.note;
          const double idle = d - 1.0 + (v - 1.0) * (d - n);
          EXPECT_NEAR(*cf.bubble_fraction, idle / (idle + v * n), 1e-12);
          EXPECT_NEAR(r.metrics.bubble_fraction, *cf.bubble_fraction, 1e-12)
              << "D=" << d << " N=" << n << " v=" << v;
        }
  // More than one group smaller than D: no closed form, and the note says so.
  const ClosedForm cf = closed_form({"interleaved-1f1b", 2, 4, 2, 1}, {});
  EXPECT_FALSE(cf.bubble_fraction);
  EXPECT_NE(cf.note.find("below D"), std::string::npos) << cf.note;
}

TEST(Generators, RejectParametersTheirDefinitionsDoNotAllow) {
  EXPECT_THROW(generate({"1f1b", 4, 3}), UsageError);
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 8, 1, 0}), UsageError);
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 8, 2, 3}), UsageError);  // g < D: deadlocks
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 8, 2, 2}), UsageError);  // g < D: deadlocks
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 8, 2, 9}), UsageError);  // g > N
  EXPECT_THROW(generate({"interleaved-1f1b", 4, 8, 2, -1}), UsageError);
  try {
    generate({"interleaved-1f1b", 4, 8, 2, 2});
    FAIL() << "a deadlocking g < D was accepted";
  } catch (const UsageError& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find("group size 2"), std::string::npos) << why;
    EXPECT_NE(why.find("--group-size 4 (PyTorch's"), std::string::npos) << why;
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
