// Zero Bubble's automatic schedules ZB-1p and ZB-2p (Qi et al., ICLR 2024, section 3): the
// reference heuristic's orders, the memory limit (and M_W share) they plan for, their bubble
// against the handcrafted ZB-H1 and ZB-H2, and the parameter rules.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::simulate_uniform;
using testing::stage_cost;

ScheduleParams params(const char* name, int d, int n, PlanningCosts c = {}, double limit = 0,
                      double w_memory = 1) {
  ScheduleParams p{name, d, n, 0, 0};
  p.costs = c;
  p.memory_limit = limit;
  p.w_memory = w_memory;
  return p;
}

// Each rank's peak activations in M_B as the search counts them: F +1, I -(1 - w), W -w.
std::vector<double> planned_peaks(const Schedule& s) {
  std::vector<double> peaks;
  for (const auto& rank : s.ranks) {
    double held = 0, peak = 0;
    for (const Action& a : rank) {
      held += a.task.op == Op::F   ? 1.0
              : a.task.op == Op::I ? s.params.w_memory - 1.0
                                   : -s.params.w_memory;
      peak = std::max(peak, held);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

StageCost as_stage_cost(const PlanningCosts& c) { return stage_cost(c.f, c.i, c.w, c.comm); }

std::string where(const ScheduleParams& p) {
  return p.name + " D=" + std::to_string(p.devices) + " N=" + std::to_string(p.microbatches) +
         " F=" + std::to_string(p.costs.f) + " I=" + std::to_string(p.costs.i) +
         " W=" + std::to_string(p.costs.w) + " comm=" + std::to_string(p.costs.comm) +
         " limit=" + std::to_string(p.memory_limit) + " w_memory=" + std::to_string(p.w_memory);
}

// ---- Golden orders ---------------------------------------------------------------------------
// Each is what the authors' search prints for the same configuration:
// sail-sg/zero-bubble-pipeline-parallelism at commit 39f2c186,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py (initial_solution, then each stage's
// passes sorted by completion time as create_scheduled_nodes does), run with
// scripts/zb_auto_reference.py (mem_f = 1, mem_b = 0, mem_w = -1, max_mem = the limit).

// At F = I = W and no communication ZB-1p is ZB-H1 (Figure 3, top).
TEST(ZbAuto, Golden1pD4N8Uniform) {
  const std::string expected =
      "rank 0: F0.0 F0.1 F0.2 F0.3 I0.0 W0.0 F0.4 I0.1 W0.1 F0.5 I0.2 W0.2 F0.6 I0.3 W0.3 F0.7 "
      "I0.4 W0.4 I0.5 W0.5 I0.6 W0.6 I0.7 W0.7\n"
      "rank 1: F1.0 F1.1 F1.2 I1.0 F1.3 I1.1 W1.0 F1.4 I1.2 W1.1 F1.5 I1.3 W1.2 F1.6 I1.4 W1.3 "
      "F1.7 I1.5 W1.4 I1.6 W1.5 I1.7 W1.6 W1.7\n"
      "rank 2: F2.0 F2.1 I2.0 F2.2 I2.1 F2.3 I2.2 W2.0 F2.4 I2.3 W2.1 F2.5 I2.4 W2.2 F2.6 I2.5 "
      "W2.3 F2.7 I2.6 W2.4 I2.7 W2.5 W2.6 W2.7\n"
      "rank 3: F3.0 I3.0 F3.1 I3.1 F3.2 I3.2 F3.3 I3.3 W3.0 F3.4 I3.4 W3.1 F3.5 I3.5 W3.2 F3.6 "
      "I3.6 W3.3 F3.7 I3.7 W3.4 W3.5 W3.6 W3.7\n";
  EXPECT_EQ(to_text(generate(params("zb-1p", 4, 8))), expected);
  EXPECT_EQ(to_text(generate(params("zb-h1", 4, 8))), expected);
}

TEST(ZbAuto, Golden2pD4N8Uniform) {
  EXPECT_EQ(to_text(generate(params("zb-2p", 4, 8))),
            "rank 0: F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 I0.0 F0.7 W0.0 I0.1 W0.1 I0.2 W0.2 I0.3 "
            "W0.3 I0.4 W0.4 I0.5 W0.5 I0.6 W0.6 I0.7 W0.7\n"
            "rank 1: F1.0 F1.1 F1.2 F1.3 F1.4 I1.0 F1.5 I1.1 F1.6 I1.2 F1.7 I1.3 W1.0 I1.4 W1.1 "
            "I1.5 W1.2 I1.6 W1.3 I1.7 W1.4 W1.5 W1.6 W1.7\n"
            "rank 2: F2.0 F2.1 F2.2 I2.0 F2.3 I2.1 F2.4 I2.2 F2.5 I2.3 F2.6 I2.4 F2.7 I2.5 W2.0 "
            "I2.6 W2.1 I2.7 W2.2 W2.3 W2.4 W2.5 W2.6 W2.7\n"
            "rank 3: F3.0 I3.0 F3.1 I3.1 F3.2 I3.2 F3.3 I3.3 F3.4 I3.4 F3.5 I3.5 F3.6 I3.6 F3.7 "
            "I3.7 W3.0 W3.1 W3.2 W3.3 W3.4 W3.5 W3.6 W3.7\n");
}

// Unequal costs, communication and a limit between 1p and 2p.
TEST(ZbAuto, GoldenD4N10UnequalCostsWithComm) {
  EXPECT_EQ(to_text(generate(params("zb-1p", 4, 10, {5, 6, 4, 1}, 5))),
            "rank 0: F0.0 F0.1 F0.2 F0.3 F0.4 I0.0 W0.0 F0.5 I0.1 W0.1 F0.6 I0.2 I0.3 W0.2 F0.7 "
            "I0.4 W0.3 F0.8 I0.5 W0.4 F0.9 W0.5 I0.6 W0.6 I0.7 W0.7 I0.8 W0.8 I0.9 W0.9\n"
            "rank 1: F1.0 F1.1 F1.2 F1.3 I1.0 F1.4 I1.1 W1.0 F1.5 I1.2 I1.3 W1.1 F1.6 I1.4 W1.2 "
            "F1.7 I1.5 W1.3 F1.8 I1.6 W1.4 F1.9 I1.7 W1.5 W1.6 I1.8 W1.7 I1.9 W1.8 W1.9\n"
            "rank 2: F2.0 F2.1 F2.2 I2.0 F2.3 I2.1 F2.4 I2.2 I2.3 W2.0 F2.5 I2.4 W2.1 F2.6 I2.5 "
            "W2.2 F2.7 I2.6 W2.3 F2.8 I2.7 W2.4 F2.9 I2.8 W2.5 I2.9 W2.6 W2.7 W2.8 W2.9\n"
            "rank 3: F3.0 I3.0 F3.1 I3.1 F3.2 I3.2 F3.3 I3.3 F3.4 I3.4 W3.0 F3.5 I3.5 W3.1 F3.6 "
            "I3.6 W3.2 F3.7 I3.7 W3.3 F3.8 I3.8 W3.4 F3.9 I3.9 W3.5 W3.6 W3.7 W3.8 W3.9\n");
}

// The paper's profiled 1.5B costs (Table 9: F 18.522, B 18.086, W 9.337, comm 0.601) on 3 ranks.
TEST(ZbAuto, Golden2pD3N6ProfiledCosts) {
  EXPECT_EQ(to_text(generate(params("zb-2p", 3, 6, {18.522, 18.086, 9.337, 0.601}))),
            "rank 0: F0.0 F0.1 F0.2 F0.3 F0.4 I0.0 F0.5 W0.0 I0.1 W0.1 I0.2 W0.2 I0.3 W0.3 I0.4 "
            "W0.4 I0.5 W0.5\n"
            "rank 1: F1.0 F1.1 F1.2 I1.0 F1.3 I1.1 F1.4 I1.2 F1.5 I1.3 W1.0 I1.4 W1.1 I1.5 W1.2 "
            "W1.3 W1.4 W1.5\n"
            "rank 2: F2.0 I2.0 F2.1 I2.1 F2.2 I2.2 F2.3 I2.3 F2.4 I2.4 F2.5 I2.5 W2.0 W2.1 W2.2 "
            "W2.3 W2.4 W2.5\n");
}

// A fractional limit below D: the search frees memory with W as soon as a forward needs room.
TEST(ZbAuto, GoldenD4N6FractionalLimit) {
  EXPECT_EQ(to_text(generate(params("zb-1p", 4, 6, {1, 2, 1, 0}, 2.5))),
            "rank 0: F0.0 F0.1 I0.0 W0.0 F0.2 I0.1 W0.1 F0.3 I0.2 W0.2 F0.4 I0.3 W0.3 F0.5 I0.4 "
            "W0.4 I0.5 W0.5\n"
            "rank 1: F1.0 I1.0 F1.1 W1.0 I1.1 F1.2 W1.1 I1.2 F1.3 W1.2 I1.3 F1.4 W1.3 I1.4 F1.5 "
            "W1.4 I1.5 W1.5\n"
            "rank 2: F2.0 I2.0 W2.0 F2.1 I2.1 W2.1 F2.2 I2.2 W2.2 F2.3 I2.3 W2.3 F2.4 I2.4 W2.4 "
            "F2.5 I2.5 W2.5\n"
            "rank 3: F3.0 I3.0 W3.0 F3.1 I3.1 W3.1 F3.2 I3.2 W3.2 F3.3 I3.3 W3.3 F3.4 I3.4 W3.4 "
            "F3.5 I3.5 W3.5\n");
}

// The paper's memory accounting, with I freeing all but M_W = M_B / 4: rank 0 takes more forwards
// ahead of its W than with the default (W frees everything).
TEST(ZbAuto, GoldenD4N12WithWeightGradientMemory) {
  EXPECT_EQ(
      to_text(generate(params("zb-1p", 4, 12, {18.522, 18.086, 9.337, 0.601}, 6, 0.25))),
      "rank 0: F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 I0.0 W0.0 F0.6 I0.1 W0.1 F0.7 I0.2 I0.3 F0.8 I0.4 "
      "F0.9 W0.2 I0.5 W0.3 I0.6 F0.10 I0.7 F0.11 W0.4 W0.5 W0.6 W0.7 I0.8 W0.8 I0.9 W0.9 I0.10 "
      "W0.10 I0.11 W0.11\n"
      "rank 1: F1.0 F1.1 F1.2 F1.3 F1.4 I1.0 F1.5 I1.1 W1.0 F1.6 I1.2 I1.3 F1.7 I1.4 F1.8 I1.5 "
      "W1.1 I1.6 F1.9 I1.7 W1.2 F1.10 I1.8 F1.11 W1.3 I1.9 W1.4 W1.5 I1.10 W1.6 W1.7 I1.11 W1.8 "
      "W1.9 W1.10 W1.11\n"
      "rank 2: F2.0 F2.1 F2.2 I2.0 F2.3 I2.1 F2.4 I2.2 F2.5 I2.3 F2.6 I2.4 F2.7 I2.5 W2.0 I2.6 "
      "F2.8 I2.7 F2.9 I2.8 W2.1 F2.10 I2.9 F2.11 I2.10 W2.2 W2.3 I2.11 W2.4 W2.5 W2.6 W2.7 W2.8 "
      "W2.9 W2.10 W2.11\n"
      "rank 3: F3.0 I3.0 F3.1 I3.1 F3.2 I3.2 F3.3 I3.3 F3.4 I3.4 F3.5 I3.5 F3.6 I3.6 F3.7 I3.7 "
      "F3.8 I3.8 F3.9 I3.9 W3.0 F3.10 I3.10 F3.11 I3.11 W3.1 W3.2 W3.3 W3.4 W3.5 W3.6 W3.7 W3.8 "
      "W3.9 W3.10 W3.11\n");
}

// ---- Invariants ------------------------------------------------------------------------------

const PlanningCosts kCostSets[] = {
    {1, 1, 1, 0}, {1, 2, 1, 0}, {2, 1, 1, 0.5}, {18.522, 18.086, 9.337, 0.601}, {1, 1, 3, 0}};

// Sound for every D, N and cost set, and never above the limit it planned for (the simulator's
// peak: activations alive from the start of F to the end of W).
TEST(ZbAuto, ValidAndWithinTheMemoryLimit) {
  for (const char* name : {"zb-1p", "zb-2p"})
    for (int d : {1, 2, 3, 4, 8})
      for (int n = 1; n <= 3 * d + 2; ++n)
        for (const PlanningCosts& c : kCostSets)
          for (double limit : {0.0, 1.0, 1.5 * d, 3.0 * d})
            for (double w_memory : {1.0, 0.37}) {
              const ScheduleParams p = params(name, d, n, c, limit, w_memory);
              SCOPED_TRACE(where(p));
              const auto sim = simulate_uniform(p, as_stage_cost(c));
              const double planned = limit == 0 ? (name[3] == '1' ? 1 : 2) * d : limit;
              EXPECT_EQ(sim.schedule.params.memory_limit, planned);
              for (double peak : planned_peaks(sim.schedule)) EXPECT_LE(peak, planned + 1e-9);
              // With W freeing everything the simulator's count is the same bound.
              if (w_memory == 1) {
                for (const auto& rank : sim.metrics.ranks)
                  EXPECT_LE(rank.peak_activations, planned) << "rank " << rank.rank;
              }
            }
}

// The search keeps each micro-batch's passes in order on a stage and runs every pass once.
TEST(ZbAuto, EveryPassOncePerStage) {
  const Schedule s = generate(params("zb-2p", 4, 9, {2, 1, 1, 0.5}));
  for (int r = 0; r < 4; ++r) {
    std::vector<int> seen(3 * 9, 0);
    for (const Action& a : s.ranks[static_cast<std::size_t>(r)]) {
      EXPECT_EQ(a.task.stage, r);
      const int k = a.task.op == Op::F ? 0 : a.task.op == Op::I ? 1 : 2;
      ++seen[static_cast<std::size_t>(k * 9 + a.task.mb)];
    }
    for (int v : seen) EXPECT_EQ(v, 1);
  }
}

// With uniform costs the search is no worse than the handcrafted schedule of the same memory:
// ZB-1p against ZB-H1 (D M_B), ZB-2p against ZB-H2 (2D-1 M_B, under 2p's 2D).
TEST(ZbAuto, NoWorseThanHandcraftedAtEqualMemory) {
  for (const PlanningCosts& c :
       {PlanningCosts{1, 1, 1, 0}, PlanningCosts{1, 2, 1, 0}, PlanningCosts{2, 2, 1, 0}})
    for (int d : {2, 3, 4, 8})
      for (int n = d; n <= 4 * d; ++n) {
        const StageCost sc = as_stage_cost(c);
        const auto one_p = simulate_uniform(params("zb-1p", d, n, c), sc);
        const auto h1 = simulate_uniform(params("zb-h1", d, n), sc);
        SCOPED_TRACE(where(params("zb-1p", d, n, c)));
        EXPECT_LE(one_p.metrics.makespan, h1.metrics.makespan + 1e-9);
        if (n < 2 * d - 1) continue;
        const auto two_p = simulate_uniform(params("zb-2p", d, n, c), sc);
        const auto h2 = simulate_uniform(params("zb-h2", d, n), sc);
        EXPECT_LE(two_p.metrics.makespan, h2.metrics.makespan + 1e-9);
      }
}

// The paper's claim for 2p M_B (section 3 and Appendix B): with F = I = W and no communication
// every rank's span is exactly its work once N >= 2D-1.
TEST(ZbAuto, TwoPHasZeroBubbleAtEqualCosts) {
  for (int d : {2, 3, 4, 8, 16})
    for (int n = 2 * d - 1; n <= 4 * d; ++n) {
      SCOPED_TRACE("D=" + std::to_string(d) + " N=" + std::to_string(n));
      const auto sim = simulate_uniform(params("zb-2p", d, n), stage_cost(1, 1, 1));
      EXPECT_EQ(sim.metrics.zb_bubble_rate, 0.0);
      for (const auto& rank : sim.metrics.ranks) EXPECT_EQ(rank.span_idle, 0.0);
    }
}

// The closed form: at F = I = W, no communication and the default limit every rank idles (D-1)F
// of the makespan once N >= D, for both searches; outside those conditions it states no figure.
TEST(ZbAuto, ClosedFormMatchesTheSimulator) {
  for (const char* name : {"zb-1p", "zb-2p"})
    for (double f : {1.0, 2.5})
      for (int d : {1, 2, 3, 4, 8, 16})
        for (int n = d; n <= 4 * d; ++n) {
          const ScheduleParams p = params(name, d, n, {f, f, f, 0});
          SCOPED_TRACE(where(p));
          const StageCost sc = stage_cost(f, f, f);
          const auto sim = simulate_uniform(p, sc);
          const ClosedForm cf = closed_form(sim.schedule.params, testing::uniform(sc));
          ASSERT_TRUE(cf.idle_per_rank.has_value());
          ASSERT_TRUE(cf.bubble_fraction.has_value());
          for (const auto& r : sim.metrics.ranks) EXPECT_NEAR(r.idle, *cf.idle_per_rank, 1e-9);
          EXPECT_NEAR(sim.metrics.bubble_fraction, *cf.bubble_fraction, 1e-12);
        }
  const UniformCost equal{1, 2, 1, 1, 3};
  EXPECT_FALSE(closed_form(params("zb-1p", 4, 3), equal).bubble_fraction.has_value());  // N < D
  EXPECT_FALSE(closed_form(params("zb-2p", 4, 8, {}, 5), equal).bubble_fraction.has_value());
  EXPECT_FALSE(closed_form(params("zb-2p", 4, 8, {}, 0, 0.5), equal).bubble_fraction.has_value());
  EXPECT_FALSE(closed_form(params("zb-1p", 4, 8), {1, 3, 2, 1, 4}).bubble_fraction.has_value());
}

// Costs steer the order: the same D, N and limit planned for other costs is another schedule.
TEST(ZbAuto, CostsChangeThePlan) {
  EXPECT_NE(to_text(generate(params("zb-1p", 4, 10, {1, 1, 1, 0}, 5))),
            to_text(generate(params("zb-1p", 4, 10, {5, 6, 4, 1}, 5))));
}

// Families with a fixed order ignore the planning costs.
TEST(ZbAuto, FixedFamiliesIgnoreCosts) {
  for (const char* name : {"1f1b", "zb-h1", "zb-h2", "zb-v"})
    EXPECT_EQ(to_text(generate(params(name, 4, 8, {5, 6, 4, 1}))),
              to_text(generate(params(name, 4, 8))))
        << name;
}

// ---- Parameter errors ------------------------------------------------------------------------

void expect_usage_error(const ScheduleParams& p, const std::string& needle) {
  try {
    generate(p);
    ADD_FAILURE() << where(p) << ": no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ZbAuto, RejectsBadParameters) {
  expect_usage_error(params("zb-1p", 4, 8, {}, 0.5), "--memory-limit 0.5");
  expect_usage_error(params("zb-2p", 4, 8, {}, -1), "--memory-limit -1");
  expect_usage_error(params("zb-1p", 4, 8, {0, 1, 1, 0}), "planning cost F");
  expect_usage_error(params("zb-1p", 4, 8, {1, -1, 1, 0}), "planning cost I");
  expect_usage_error(params("zb-2p", 4, 8, {1, 1, 1, -2}), "planning comm");
  expect_usage_error(params("zb-2p", 4, 8, {}, 0, 1.5), "--w-memory 1.5");
  expect_usage_error(params("zb-1p", 4, 8, {}, 0, -0.1), "--w-memory -0.1");
  expect_usage_error(params("1f1b", 4, 8, {}, 0, 0.5), "--w-memory is not allowed for '1f1b'");
  // Only the cost-aware families take a memory limit.
  expect_usage_error(params("1f1b", 4, 8, {}, 4), "--memory-limit is not allowed for '1f1b'");
  expect_usage_error(params("zb-h2", 4, 8, {}, 8), "only zb-1p and zb-2p");
  ScheduleParams chunks = params("zb-1p", 4, 8);
  chunks.chunks = 2;
  expect_usage_error(chunks, "--chunks");
}

}  // namespace
}  // namespace ppbench
