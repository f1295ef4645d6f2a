// The simulator with ranks that share fewer cores than there are ranks (a CPU run with more
// rank threads than cores): by hand, against the plain simulation where every rank has a core,
// and the properties any timing on C cores must have.
#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "schedules/deps.h"
#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::stage_cost;

Trace on_cores(const Schedule& s, const CostModel& costs, int cores) {
  return simulate(s, costs, {.cores = cores});
}

TEST(SharedCores, TwoRanksOnOneCoreByHand) {
  // 1F1B, D = 2, N = 2, F = 1, B = 2, no comm, one core; the earliest-ready action takes the
  // core, the lower rank first on a tie:
  //   F0.0 [0,1]; F0.1 and F1.0 both ready at 1: F0.1 [1,2], F1.0 [2,3]; B1.0 [3,5];
  //   B0.0 and F1.1 both ready at 5: B0.0 [5,7], F1.1 [7,8]; B1.1 [8,10]; B0.1 [10,12].
  const Schedule s = generate({"1f1b", 2, 2});
  const CostModel costs = CostModel::uniform(2, stage_cost(1, 1, 1));
  const Trace t = on_cores(s, costs, 1);
  ASSERT_EQ(t.compute.size(), 8u);
  const auto& e = t.compute;  // rank 0's F0.0 F0.1 B0.0 B0.1, then rank 1's F1.0 B1.0 F1.1 B1.1
  const double want[8][2] = {{0, 1}, {1, 2}, {5, 7}, {10, 12}, {2, 3}, {3, 5}, {7, 8}, {8, 10}};
  for (int k = 0; k < 8; ++k) {
    EXPECT_DOUBLE_EQ(e[k].start, want[k][0]) << to_string(e[k].action);
    EXPECT_DOUBLE_EQ(e[k].end, want[k][1]) << to_string(e[k].action);
  }
  EXPECT_DOUBLE_EQ(compute_metrics(t, s.placement).makespan, 12.0);
  // With a core each, the same step takes 9: B0.1 follows B1.1, which ends at 7.
  EXPECT_DOUBLE_EQ(compute_metrics(on_cores(s, costs, 2), s.placement).makespan, 9.0);
}

// Schedules of every family at random D >= 2, N and v, with random per-stage costs and
// transfers; `check(schedule, costs, where)`.
template <class Check>
void for_random_costed_schedules(unsigned seed, int trials, Check&& check) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> cost(0.1, 3.0), comm(0.0, 0.7);
  const int checked = testing::for_random_schedules(
      rng, trials, 8, 24, 3,
      [&](int, const ScheduleInfo& info, const ScheduleParams& p, const Schedule& s) {
        if (p.devices < 2) return;  // one rank never shares a core
        std::vector<StageCost> stages;
        for (int k = 0; k < s.stages(); ++k) {
          StageCost c = stage_cost(cost(rng), cost(rng), cost(rng), comm(rng));
          c.fb = c.f + c.b - 0.3 * std::min(c.f, c.b);
          stages.push_back(c);
        }
        check(s, CostModel(stages),
              std::string(info.name) + " D=" + std::to_string(p.devices) +
                  " N=" + std::to_string(p.microbatches));
      });
  EXPECT_GT(checked, trials / 3);
}

TEST(SharedCores, AsManyCoresAsRanksIsThePlainSimulation) {
  for_random_costed_schedules(
      20261125, 150, [](const Schedule& s, const CostModel& m, const std::string& where) {
        const Trace plain = simulate(s, m);
        for (int cores : {s.placement.ranks, s.placement.ranks + 3}) {
          const Trace t = on_cores(s, m, cores);
          ASSERT_EQ(t.compute.size(), plain.compute.size()) << where;
          for (std::size_t k = 0; k < t.compute.size(); ++k) {
            EXPECT_EQ(t.compute[k].start, plain.compute[k].start) << where << " cores " << cores;
            EXPECT_EQ(t.compute[k].end, plain.compute[k].end) << where << " cores " << cores;
          }
        }
      });
}

// What any timing on C cores must hold: each rank's actions in its order, one at a time; every
// input ended (and crossed ranks) before its consumer starts; never more than C actions at once;
// no earlier than with a core per rank nor than the work spread over C cores. With one core and
// no transfer time, the core never idles: the step is the sum of its actions.
TEST(SharedCores, EveryTimingRespectsOrdersInputsAndTheCoreCount) {
  std::mt19937 rng(7);
  for_random_costed_schedules(
      20261126, 300, [&](const Schedule& s, const CostModel& m, const std::string& where) {
        const Placement& p = s.placement;
        const int cores = std::uniform_int_distribution<int>(1, p.ranks - 1)(rng);
        const Trace t = on_cores(s, m, cores);
        ASSERT_EQ(t.compute.size(), s.action_count()) << where;
        const Metrics got = compute_metrics(t, p);
        const TaskIndex index(p);
        double work = 0;
        std::vector<std::pair<double, int>> edges;  // +1 at a start, -1 at an end (ends sort first)
        std::vector<double> end_of(index.rows() * 2, -1);
        for (const ComputeEvent& e : t.compute) {
          work += e.end - e.start;
          edges.push_back({e.start, +1});
          edges.push_back({e.end, -1});
          for (const Task& task : e.action.tasks()) {
            if (task.op != Op::W)
              end_of[index.row(task.stage, task.mb) * 2 + TaskIndex::slot(task.op)] = e.end;
          }
        }
        std::size_t k = 0;
        for (int r = 0; r < p.ranks; ++r)
          for (std::size_t pos = 0; pos < s.ranks[r].size(); ++pos, ++k) {
            const ComputeEvent& e = t.compute[k];
            if (pos > 0) {
              EXPECT_GE(e.start, t.compute[k - 1].end) << where << " rank " << r;
            }
            for (const Task& task : e.action.tasks()) {
              index.for_each_dependency(task, [&](const TaskIndex::Dep& d) {
                const double delay = p.stage_rank[d.stage] == r ? 0 : m.comm(d.stage, task.stage);
                EXPECT_GE(e.start, end_of[d.row * 2 + d.slot] + delay - 1e-9)
                    << where << ": " << to_string(e.action) << " before its input";
                return true;
              });
            }
          }
        std::sort(edges.begin(), edges.end());
        int running = 0, most = 0;
        for (const auto& [at, change] : edges) most = std::max(most, running += change);
        EXPECT_LE(most, cores) << where << " on " << cores << " core(s)";
        EXPECT_GE(got.makespan, compute_metrics(simulate(s, m), p).makespan - 1e-9) << where;
        EXPECT_GE(got.makespan, work / cores - 1e-9) << where;
        // The metrics streamed during the walk are the trace's.
        EXPECT_EQ(simulate_metrics(s, m, cores).makespan, got.makespan) << where;

        std::vector<StageCost> no_comm = m.stages();
        for (StageCost& c : no_comm) c.comm = 0;
        EXPECT_NEAR(compute_metrics(on_cores(s, CostModel(no_comm), 1), p).makespan, work,
                    1e-9 * work)
            << where;
      });
}

TEST(SharedCores, ANegativeCoreCountIsRefused) {
  const Schedule s = generate({"gpipe", 2, 2, 0, 0});
  EXPECT_THROW(on_cores(s, CostModel::uniform(2, StageCost{}), -1), std::invalid_argument);
}

}  // namespace
}  // namespace ppbench
