// The simulator with hand-overs by rendezvous (StageCost::rendezvous): by hand, and against the
// model's own rules re-derived from the timeline of random schedules.
#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "schedules/deps.h"
#include "sim_helpers.h"

namespace ppbench {
namespace {

using testing::stage_cost;

StageCost by_rendezvous(StageCost c, double handshake) {
  c.rendezvous = true;
  c.handshake = handshake;
  return c;
}

void expect_spans(const Trace& t, const std::vector<std::pair<double, double>>& want) {
  ASSERT_EQ(t.compute.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_DOUBLE_EQ(t.compute[k].start, want[k].first) << to_string(t.compute[k].action);
    EXPECT_DOUBLE_EQ(t.compute[k].end, want[k].second) << to_string(t.compute[k].action);
  }
}

double start_of(const Trace& t, const std::string& action) {
  for (const ComputeEvent& e : t.compute)
    if (to_string(e.action) == action) return e.start;
  ADD_FAILURE() << "no " << action << " in the timeline";
  return -1;
}

TEST(Rendezvous, OneF1BOnTwoRanksByHand) {
  // 1F1B, D = 2, N = 2, F = 1, B = 2, comm 0.25, handshake 0.1. Rank 0 runs F0.0 [0,1] and F0.1
  // [1,2]. F0.0's announcement reaches rank 1 at 1.1, whose answer reaches rank 0 at 1.2, inside
  // F0.1: the tensor leaves at 2 and arrives at 2.25. F1.0 [2.25,3.25], B1.0 [3.25,5.25]. Rank 1
  // asks for F0.1 (announced at 2.1) only when it is free at F1.1, at 5.25: rank 0, waiting for
  // B0.0, sends at 5.35, in at 5.6. B1.0's gradient, announced at 5.35, is asked for at once by
  // the waiting rank 0; rank 1, waiting too, sends at 5.45, in at 5.7. F1.1 [5.6,6.6], B1.1
  // [6.6,8.6], B0.0 [5.7,7.7]; B1.1's gradient: announced 8.7, answered 8.8, in at 9.05; B0.1
  // [9.05,11.05].
  const Schedule s = generate({"1f1b", 2, 2});
  const CostModel costs = CostModel::uniform(2, by_rendezvous(stage_cost(1, 1, 1, 0.25), 0.1));
  const Trace t = simulate(s, costs);
  // Rank 0's F0.0 F0.1 B0.0 B0.1, then rank 1's F1.0 B1.0 F1.1 B1.1.
  expect_spans(t, {{0, 1},
                   {1, 2},
                   {5.7, 7.7},
                   {9.05, 11.05},
                   {2.25, 3.25},
                   {3.25, 5.25},
                   {5.6, 6.6},
                   {6.6, 8.6}});
  // Each transfer lasts from its producer's end to its arrival.
  ASSERT_EQ(t.comm.size(), 4u);
  std::map<std::string, std::pair<double, double>> spans;
  for (const CommEvent& c : t.comm) spans[to_string(c.task)] = {c.start, c.end};
  EXPECT_DOUBLE_EQ(spans["F0.0"].second, 2.25);
  EXPECT_DOUBLE_EQ(spans["F0.1"].first, 2.0);
  EXPECT_DOUBLE_EQ(spans["F0.1"].second, 5.6);
  EXPECT_DOUBLE_EQ(spans["B1.0"].second, 5.7);
  EXPECT_DOUBLE_EQ(spans["B1.1"].second, 9.05);
  EXPECT_DOUBLE_EQ(simulate_metrics(s, costs).makespan, 11.05);
  // Eager, the same step takes 9.5.
  EXPECT_DOUBLE_EQ(simulate_metrics(s, CostModel::uniform(2, stage_cost(1, 1, 1, 0.25))).makespan,
                   9.5);
}

TEST(Rendezvous, AnAnswerThatComesAsAnActionEndsIsServedBeforeTheNext) {
  // GPipe, D = 2, N = 3, F = 1, handshake 0.5, comm 0: F0.0's answer reaches rank 0 at 2, as
  // F0.1 ends and F0.2 is due; the rank looks between the two, so F1.0 starts at 2, not 3.
  const Schedule s = generate({"gpipe", 2, 3});
  const Trace t = simulate(s, CostModel::uniform(2, by_rendezvous(stage_cost(1, 1, 1, 0), 0.5)));
  EXPECT_DOUBLE_EQ(start_of(t, "F1.0"), 2.0);
}

TEST(Rendezvous, ABusyProducerHoldsTheTensorUntilItsActionEnds) {
  // GPipe, D = 2, N = 2, F = 3, handshake 0.25, comm 0: F0.0 ends at 3 and rank 1 answers at
  // once, but the answer reaches rank 0 at 3.5, inside F0.1 until 6, so F1.0 starts at 6 (eager:
  // 3), however short the handshake.
  const Schedule s = generate({"gpipe", 2, 2});
  const Trace t = simulate(s, CostModel::uniform(2, by_rendezvous(stage_cost(3, 1, 1, 0), 0.25)));
  EXPECT_DOUBLE_EQ(start_of(t, "F1.0"), 6.0);
}

TEST(Rendezvous, RanksThatShareCoresAreRefused) {
  const Schedule s = generate({"1f1b", 2, 2});
  const CostModel costs = CostModel::uniform(2, by_rendezvous(stage_cost(1, 1, 1, 0.25), 0.1));
  EXPECT_THROW(simulate(s, costs, {.cores = 1}), std::invalid_argument);
  EXPECT_THROW(simulate_metrics(s, costs, 1), std::invalid_argument);
}

// Every random schedule's timeline, by rendezvous on random boundaries, against the model's
// rules re-derived from the timeline itself: each transfer leaves when its producer's rank is
// first between actions after the answer comes (answer = the latest of the announcement, the
// consumer's rank being free for the action and the action's earlier inputs from other ranks
// being in hand, plus a handshake each way) and arrives `comm` later; each action starts at the
// latest of its rank's previous end and its inputs' arrivals. Since these rules fix every time in
// turn, a timeline that keeps them is the model's.
TEST(Rendezvous, EveryTimelineKeepsTheRulesOfTheModel) {
  std::mt19937 rng(20261127);
  std::uniform_real_distribution<double> cost(0.1, 3.0), comm(0.0, 0.7), handshake(0.0, 0.4);
  std::bernoulli_distribution rendezvous(0.6);
  int with_waits = 0;
  const int checked = testing::for_random_schedules(
      rng, 300, 8, 16, 3,
      [&](int, const ScheduleInfo& info, const ScheduleParams& params, const Schedule& s) {
        const std::string where = std::string(info.name) + " D=" + std::to_string(params.devices) +
                                  " N=" + std::to_string(params.microbatches);
        std::vector<StageCost> stages;
        for (int k = 0; k < s.stages(); ++k) {
          StageCost c = stage_cost(cost(rng), cost(rng), cost(rng), comm(rng));
          c.fb = c.f + c.b - 0.3 * std::min(c.f, c.b);
          if (rendezvous(rng)) c = by_rendezvous(c, handshake(rng));
          stages.push_back(c);
        }
        const CostModel m(stages);
        const Placement& p = s.placement;
        const Trace t = simulate(s, m);
        ASSERT_EQ(t.compute.size(), s.action_count()) << where;
        EXPECT_DOUBLE_EQ(simulate_metrics(s, m).makespan, compute_metrics(t, p).makespan) << where;

        const TaskIndex index(p);
        std::vector<std::size_t> first(p.ranks + 1, 0);
        for (int r = 0; r < p.ranks; ++r) first[r + 1] = first[r] + s.ranks[r].size();
        // Per output: its producer's end, and where it was taken in on another rank.
        std::vector<double> end_of(index.rows() * 2, -1);
        std::map<std::size_t, std::tuple<int, std::size_t, int>> consumer;  // rank, pos, stage
        // Per output from another rank: the outputs its consumer takes in before it.
        std::map<std::size_t, std::vector<std::size_t>> taken_before;
        for (int r = 0; r < p.ranks; ++r)
          for (std::size_t pos = 0; pos < s.ranks[r].size(); ++pos) {
            const ComputeEvent& e = t.compute[first[r] + pos];
            std::vector<std::size_t> inputs;  // from other ranks, in the order they are taken
            for (const Task& task : e.action.tasks()) {
              if (task.op != Op::W)
                end_of[index.row(task.stage, task.mb) * 2 + TaskIndex::slot(task.op)] = e.end;
              index.for_each_dependency(task, [&](const TaskIndex::Dep& d) {
                if (p.stage_rank[d.stage] == r) return true;
                consumer[d.row * 2 + d.slot] = {r, pos, task.stage};
                taken_before[d.row * 2 + d.slot] = inputs;
                inputs.push_back(d.row * 2 + d.slot);
                return true;
              });
            }
          }
        std::map<std::size_t, double> arrival;
        ASSERT_EQ(t.comm.size(), consumer.size()) << where;
        for (const CommEvent& c : t.comm)
          arrival[index.row(c.task.stage, c.task.mb) * 2 + TaskIndex::slot(c.task.op)] = c.end;
        for (const CommEvent& c : t.comm) {
          const std::size_t out =
              index.row(c.task.stage, c.task.mb) * 2 + TaskIndex::slot(c.task.op);
          const auto [r, pos, to_stage] = consumer.at(out);
          EXPECT_EQ(c.start, end_of[out]) << where;
          const double h = m.handshake(c.task.stage, to_stage);
          double leaves = c.start;
          if (h >= 0) {
            double free_for_it = pos > 0 ? t.compute[first[r] + pos - 1].end : 0;
            for (std::size_t before : taken_before.at(out))
              free_for_it = std::max(free_for_it, arrival.at(before));
            leaves = std::max(c.start + h, free_for_it) + h;
            const int producer = p.stage_rank[c.task.stage];
            for (std::size_t k = first[producer]; k < first[producer + 1]; ++k)
              if (t.compute[k].start <= leaves && leaves < t.compute[k].end) {
                leaves = t.compute[k].end;
                ++with_waits;
                break;
              }
          }
          EXPECT_NEAR(c.end, leaves + m.comm(c.task.stage, to_stage), 1e-9)
              << where << ": " << to_string(c.task) << (h >= 0 ? " by rendezvous" : " eager");
        }
        for (int r = 0; r < p.ranks; ++r)
          for (std::size_t pos = 0; pos < s.ranks[r].size(); ++pos) {
            const ComputeEvent& e = t.compute[first[r] + pos];
            double start = pos > 0 ? t.compute[first[r] + pos - 1].end : 0;
            for (const Task& task : e.action.tasks())
              index.for_each_dependency(task, [&](const TaskIndex::Dep& d) {
                const std::size_t out = d.row * 2 + d.slot;
                start = std::max(start, p.stage_rank[d.stage] == r ? end_of[out] : arrival.at(out));
                return true;
              });
            EXPECT_NEAR(e.start, start, 1e-9) << where << ": " << to_string(e.action);
          }
      });
  EXPECT_GT(checked, 100);
  EXPECT_GT(with_waits, 100);  // the busy producer's case is exercised, not only idle ones
}

}  // namespace
}  // namespace ppbench
