// The partitioner: balanced is optimal (brute force), uniform and explicit lists as documented.
#include <algorithm>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "workloads/mlp.h"
#include "workloads/partition.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

double max_stage(const std::vector<double>& cost, const std::vector<int>& counts) {
  double worst = 0;
  std::size_t i = 0;
  for (int c : counts) {
    double sum = 0;
    for (int k = 0; k < c; ++k) sum += cost[i++];
    worst = std::max(worst, sum);
  }
  return worst;
}

// Every composition of n into s positive parts.
double brute_force(const std::vector<double>& cost, int stages) {
  const int n = static_cast<int>(cost.size());
  double best = 1e300;
  std::vector<int> counts;
  std::function<void(int, int)> go = [&](int left, int parts) {
    if (parts == 1) {
      counts.push_back(left);
      best = std::min(best, max_stage(cost, counts));
      counts.pop_back();
      return;
    }
    for (int c = 1; c <= left - (parts - 1); ++c) {
      counts.push_back(c);
      go(left - c, parts - 1);
      counts.pop_back();
    }
  };
  go(n, stages);
  return best;
}

TEST(Partition, BalancedIsOptimalOnRandomInstances) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 11);
    const int stages = 1 + static_cast<int>(rng() % n);
    std::vector<double> cost(n);
    // Integer costs (exact in double), zeros and heavy outliers included.
    for (auto& c : cost)
      c = static_cast<double>(rng() % 4 == 0 ? 0 : rng() % (trial % 3 ? 20 : 1000));
    const std::vector<int> counts = balanced_partition(cost, stages);
    ASSERT_EQ(static_cast<int>(counts.size()), stages);
    int sum = 0;
    for (int c : counts) {
      EXPECT_GE(c, 1);
      sum += c;
    }
    ASSERT_EQ(sum, n);
    EXPECT_EQ(max_stage(cost, counts), brute_force(cost, stages)) << "trial " << trial;
  }
}

TEST(Partition, BalancedOnEqualCostsIsEven) {
  EXPECT_EQ(balanced_partition(std::vector<double>(8, 1.0), 4), (std::vector<int>{2, 2, 2, 2}));
  // Ties give later stages the extra layers.
  EXPECT_EQ(balanced_partition(std::vector<double>(10, 1.0), 4), (std::vector<int>{1, 3, 3, 3}));
}

// Thousands of stages over hundreds of thousands of layers, which a table of stages x layers
// (3.3 GB here) could not hold: the optimum is still found, ceil(layers / stages) of equal
// layers, with later stages taking the extra.
TEST(Partition, BalancedScalesToManyStagesAndLayers) {
  const int layers = 200000, stages = 2048;
  const std::vector<double> cost(layers, 1.0);
  const std::vector<int> counts = balanced_partition(cost, stages);
  ASSERT_EQ(static_cast<int>(counts.size()), stages);
  EXPECT_EQ(max_stage(cost, counts), 98.0);  // ceil(200000 / 2048)
  int sum = 0;
  for (int c : counts) sum += c;
  EXPECT_EQ(sum, layers);
  EXPECT_TRUE(std::is_sorted(counts.begin(), counts.end())) << "later stages take the extra";
}

TEST(Partition, UniformSpreadsLeftoversToFirstStages) {
  EXPECT_EQ(uniform_partition(10, 4), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(uniform_partition(8, 4), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(uniform_partition(5, 5), (std::vector<int>{1, 1, 1, 1, 1}));
}

WorkloadSpec mlp(int64_t layers) {
  MlpConfig c;
  c.layers = layers;
  c.width = 16;
  return build_mlp(c, 2, DType::kF32);
}

TEST(Partition, ExplicitListAndStageTotals) {
  const WorkloadSpec spec = mlp(6);
  const PartitionPlan plan = partition(spec, 3, "1,2,3");
  EXPECT_EQ(plan.method, "explicit");
  ASSERT_EQ(plan.stages.size(), 3u);
  EXPECT_EQ(plan.stages[1].first_layer, 1);
  EXPECT_EQ(plan.stages[2].num_layers, 3);
  int64_t params = 0;
  double flops = 0;
  for (const auto& s : plan.stages) params += s.params, flops += s.flops.total();
  EXPECT_EQ(params, spec.params());
  EXPECT_EQ(flops, spec.flops().total());
  EXPECT_EQ(plan.stages[0].boundary_bytes_out, spec.layers[0].boundary_bytes());
  EXPECT_EQ(plan.stages[2].boundary_bytes_out, 0);
  EXPECT_EQ(stages_in_list("1,2,3"), 3);
  EXPECT_EQ(stages_in_list("balanced"), 0);
}

TEST(Partition, BalancedIsNoWorseThanUniformOnLlama) {
  TransformerConfig c = transformer_preset("llama3-8b");
  const WorkloadSpec spec = build_transformer(c, 1, DType::kBF16);
  const PartitionPlan plan = partition(spec, 4, "balanced");
  std::vector<double> cost;
  for (const auto& l : spec.layers) cost.push_back(l.flops.total());
  EXPECT_EQ(plan.max_stage_cost(), max_stage(cost, plan.layer_counts));
  EXPECT_LE(plan.max_stage_cost(), partition(spec, 4, "uniform").max_stage_cost());
}

void expect_usage(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no UsageError; expected one naming '" << needle << "'";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Partition, BadInputsAreUsageErrors) {
  const WorkloadSpec spec = mlp(6);
  expect_usage([&] { partition(spec, 8, "balanced"); }, "6 layers");
  expect_usage([&] { partition(spec, 8, "balanced"); }, "8 stages");
  expect_usage([&] { partition(spec, 3, "1,2"); }, "2 entries");
  expect_usage([&] { partition(spec, 3, "1,2,4"); }, "sums to 7");
  expect_usage([&] { partition(spec, 3, "1,0,5"); }, "entry 0");
  expect_usage([&] { partition(spec, 3, "1,x,4"); }, "'x'");
  expect_usage([&] { partition(spec, 3, "greedy"); }, "greedy");
  expect_usage([&] { partition(spec, 0, "balanced"); }, "--stages 0");
}

}  // namespace
}  // namespace ppbench
