// Per-stage costs from a workload (harness/workload_costs.h) and device profiles
// (harness/device_profile.h): the roofline, the stage sums, the hand-over, a measured profile's
// round trip through a trace, and bad profiles refused naming the key.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/device_profile.h"
#include "harness/metrics.h"
#include "harness/replay.h"
#include "harness/simulator.h"
#include "harness/workload_costs.h"
#include "schedules/registry.h"
#include "workloads/mlp.h"
#include "workloads/partition.h"

namespace ppbench {
namespace {

// 8 layers of width 64: layers 1..6 are the same linear + GeLU block.
WorkloadSpec mlp8() { return build_mlp({8, 64, 0, 10}, 4, DType::kF32); }

DeviceProfile rates(double peak, double memory, double link, double latency) {
  DeviceProfile p;
  p.kind = "rates";
  p.name = "test";
  p.rates = {peak, memory, link, latency};
  return p;
}

TEST(WorkloadCosts, RooflinePicksTheLargerTerm) {
  const DeviceRates r{100, 10, 1, 0};
  EXPECT_DOUBLE_EQ(roofline_time(1000, 50, r), 10);  // compute-bound: 1000/100 > 50/10
  EXPECT_DOUBLE_EQ(roofline_time(100, 50, r), 5);    // memory-bound: 50/10 > 100/100
}

TEST(WorkloadCosts, StageWithTwiceTheLayersCostsTwice) {
  const WorkloadSpec spec = mlp8();
  // Stage 1 holds layers 1-2, stage 2 layers 3-6: the same block twice and four times.
  const PartitionPlan plan = partition(spec, 4, "1,2,4,1");
  for (const DeviceProfile& p : {rates(1e9, 1e15, 1e9, 0), rates(1e15, 1e9, 1e9, 0)}) {
    const std::vector<StageCost> c = stage_costs(spec, plan, p);
    ASSERT_EQ(c.size(), 4u);
    EXPECT_NEAR(c[2].f, 2 * c[1].f, 1e-12 * c[2].f);
    EXPECT_NEAR(c[2].i, 2 * c[1].i, 1e-12 * c[2].i);
    EXPECT_NEAR(c[2].w, 2 * c[1].w, 1e-12 * c[2].w);
    for (const StageCost& s : c) {
      EXPECT_DOUBLE_EQ(s.b, s.i + s.w);
      EXPECT_DOUBLE_EQ(s.fb, s.f + s.b);
      EXPECT_GT(s.f, 0);
    }
    EXPECT_EQ(bounding_stage(c), 2);
  }
}

TEST(WorkloadCosts, ComputeBoundStagesFollowTheFlops) {
  const WorkloadSpec spec = mlp8();
  const PartitionPlan plan = partition(spec, 2, "4,4");
  // Memory and link so fast that only the FLOPs count.
  const std::vector<StageCost> c = stage_costs(spec, plan, rates(1e9, 1e30, 1e30, 0));
  Flops first;
  for (int l = 0; l < 4; ++l) first += spec.layers[static_cast<std::size_t>(l)].flops;
  EXPECT_NEAR(c[0].f, first.f / 1e9, 1e-12 * c[0].f);
  EXPECT_NEAR(c[0].i, first.i / 1e9, 1e-12 * c[0].i);
  EXPECT_NEAR(c[0].w, first.w / 1e9, 1e-12 * c[0].w);
}

TEST(WorkloadCosts, MemoryBoundStagesFollowTheBytes) {
  const WorkloadSpec spec = mlp8();
  const PartitionPlan plan = partition(spec, 2, "4,4");
  const std::vector<StageCost> c = stage_costs(spec, plan, rates(1e30, 1e6, 1e30, 0));
  double f = 0, w = 0;
  for (std::size_t l = 4; l < 8; ++l) f += layer_bytes(spec, l).f, w += layer_bytes(spec, l).w;
  EXPECT_NEAR(c[1].f, f / 1e6, 1e-12 * c[1].f);
  EXPECT_NEAR(c[1].w, w / 1e6, 1e-12 * c[1].w);
  // W reads what it kept and accumulates into the weight gradient: M_W + 2 x weights.
  const LayerSpec& l5 = spec.layers[5];
  EXPECT_DOUBLE_EQ(layer_bytes(spec, 5).w,
                   static_cast<double>(l5.activation.w) + 2.0 * static_cast<double>(l5.params) * 4);
}

TEST(WorkloadCosts, CommIsBoundaryBytesOverBandwidthPlusLatency) {
  const WorkloadSpec spec = mlp8();
  const PartitionPlan plan = partition(spec, 4, "1,2,4,1");
  const std::vector<StageCost> c = stage_costs(spec, plan, rates(1e9, 1e9, 2e6, 3e-4));
  for (std::size_t s = 0; s + 1 < c.size(); ++s) {
    const double bytes = static_cast<double>(plan.stages[s].boundary_bytes_out);
    ASSERT_GT(bytes, 0);
    EXPECT_DOUBLE_EQ(c[s].comm, bytes / 2e6 + 3e-4);
  }
  EXPECT_EQ(c.back().comm, 0);  // the last stage sends nothing on
}

TEST(WorkloadCosts, ScheduleStagesCostWhatTheirChainPositionDoes) {
  ScheduleParams p{"interleaved-1f1b", 2, 4, 2};
  const Schedule s = generate(p);
  const WorkloadSpec spec = mlp8();
  const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), "balanced");
  const std::vector<StageCost> parts = stage_costs(spec, plan, default_profile());
  const CostModel m = schedule_cost_model(s.placement, parts);
  ASSERT_EQ(m.stages().size(), 4u);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(m.stages()[k].f, parts[k].f);
}

// The measured profile of `t`, as run --profile-out writes it for an MLP of 6 layers cut into
// `counts` ("2,2,2").
nlohmann::json profile_json(const Trace& t, const Placement& placement, const std::string& counts) {
  const WorkloadSpec spec = build_mlp({6, 8, 0, 4}, 1, DType::kF32);
  const nlohmann::json identity = {{"workload", "mlp"},
                                   {"workload_config", spec.config},
                                   {"microbatch_size", 1},
                                   {"dtype", "f32"}};
  return measured_profile_json(t, placement, partition(spec, placement.stages_per_chain(), counts),
                               identity);
}

// Costs that differ per stage, simulated, then read back from the trace as a measured profile.
TEST(DeviceProfile, MeasuredProfileRecoversTheSimulatedCosts) {
  const Schedule s = generate({"1f1b", 3, 6});
  std::vector<StageCost> parts(3);
  for (int k = 0; k < 3; ++k) {
    StageCost& c = parts[static_cast<std::size_t>(k)];
    c.f = 1 + k, c.i = c.w = 0.5 * (1 + k), c.b = 1 + k, c.fb = c.f + c.b;
    c.comm = k < 2 ? 0.25 * (k + 1) : 0;
    c.send = k < 2 ? 0.125 * (k + 1) : 0;
  }
  const Trace t = simulate(s, schedule_cost_model(s.placement, parts));
  const DeviceProfile p = parse_device_profile(profile_json(t, s.placement, "2,2,2"), "test.json");
  ASSERT_EQ(p.kind, "measured");
  ASSERT_EQ(p.stages.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_DOUBLE_EQ(p.stages[k].f, parts[k].f);
    EXPECT_DOUBLE_EQ(p.stages[k].b, parts[k].b);
    EXPECT_DOUBLE_EQ(p.stages[k].i, parts[k].b / 2);
    EXPECT_DOUBLE_EQ(p.stages[k].fb, parts[k].f + parts[k].b);
    EXPECT_DOUBLE_EQ(p.stages[k].comm, parts[k].comm);
    EXPECT_DOUBLE_EQ(p.stages[k].send, parts[k].send);
  }
  // And the simulation of the profile takes the same time.
  const WorkloadSpec spec = build_mlp({6, 8, 0, 4}, 1, DType::kF32);
  const Trace again = simulate(
      s, schedule_cost_model(s.placement, stage_costs(spec, partition(spec, 3, "2,2,2"), p)));
  EXPECT_DOUBLE_EQ(compute_metrics(again, s.placement).makespan,
                   compute_metrics(t, s.placement).makespan);
  EXPECT_EQ(p.measured_for["layer_counts"], nlohmann::json({2, 2, 2}));
}

// A step whose forwards on one stage are skewed (one of four stalled): the median profile keeps
// the typical forward, the mean one what the step spent on them.
TEST(DeviceProfile, TheStatisticIsTheMedianOrTheMeanOfEachOpsTimes) {
  const Schedule s = generate({"1f1b", 2, 4});
  std::vector<StageCost> parts(2);
  for (StageCost& c : parts) c.f = 1, c.i = c.w = 1, c.b = 2, c.fb = 3;
  Trace t = simulate(s, schedule_cost_model(s.placement, parts));
  int stretched = 0;
  for (ComputeEvent& e : t.compute)
    if (e.action.task.op == Op::F && e.action.task.stage == 0 && e.action.task.mb == 3)
      e.end = e.start + 5, ++stretched;
  ASSERT_EQ(stretched, 1);
  const WorkloadSpec spec = build_mlp({6, 8, 0, 4}, 1, DType::kF32);
  const nlohmann::json identity = {{"workload", "mlp"},
                                   {"workload_config", spec.config},
                                   {"microbatch_size", 1},
                                   {"dtype", "f32"}};
  const PartitionPlan plan = partition(spec, 2, "3,3");
  const nlohmann::json by_median = measured_profile_json(t, s.placement, plan, identity);
  const nlohmann::json by_mean =
      measured_profile_json(t, s.placement, plan, identity, ProfileStatistic::kMean);
  EXPECT_DOUBLE_EQ(by_median["stages"][0]["F"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(by_mean["stages"][0]["F"].get<double>(), (1 + 1 + 1 + 5) / 4.0);
  EXPECT_DOUBLE_EQ(by_mean["stages"][1]["F"].get<double>(), 1.0);  // the other stage's: even
  EXPECT_EQ(by_median["statistic"], "median over the last measured step's actions");
  EXPECT_EQ(by_mean["statistic"], "mean over the last measured step's actions");
  EXPECT_EQ(profile_statistic("mean"), ProfileStatistic::kMean);
  EXPECT_THROW(profile_statistic("avg"), UsageError);
}

// The receives that found their tensor already sent measured the consumer's own work (`recv`,
// per consuming stage); the boundary's latency is what the waiting ones took beyond it, as the
// replay splits them (hand_over_from_trace).
TEST(DeviceProfile, QueuedReceivesBecomeTheConsumersWorkAndTheRestTheLatency) {
  const Schedule s = generate({"1f1b", 2, 4});
  std::vector<StageCost> parts(2);
  parts[0].comm = 0.25;
  Trace t = simulate(s, schedule_cost_model(s.placement, parts));
  int queued = 0;
  for (CommEvent& c : t.comm)
    if (c.task.op == Op::F) c.queued = true, c.end = c.start + 0.1, ++queued;
  ASSERT_EQ(queued, 4);
  nlohmann::json j = profile_json(t, s.placement, "3,3");
  const DeviceProfile p = parse_device_profile(j, "t.json");
  EXPECT_NEAR(p.stages[1].recv, 0.1, 1e-12);  // stage 1 took the activations in
  EXPECT_DOUBLE_EQ(p.stages[0].recv, 0.0);    // every gradient waited
  EXPECT_FALSE(j["stages"][0].contains("recv"));
  EXPECT_NEAR(p.stages[0].comm, 0.25 - 0.1, 1e-12);
  // Every receive waited (as the GPU executors record them): the plain median, as before.
  for (CommEvent& c : t.comm) c.queued = false;
  EXPECT_NEAR(parse_device_profile(profile_json(t, s.placement, "3,3"), "t.json").stages[0].comm,
              (0.1 + 0.25) / 2, 1e-12);
  // Bad values are refused naming the key.
  auto refused = [](const nlohmann::json& bad) -> std::string {
    try {
      parse_device_profile(bad, "t.json");
    } catch (const UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  j["stages"][1]["recv"] = -1;
  EXPECT_NE(refused(j).find("stages[1].recv"), std::string::npos) << refused(j);
  j["stages"][1].erase("recv");
  j["stages"][0]["send"] = "slow";
  EXPECT_NE(refused(j).find("stages[0].send"), std::string::npos) << refused(j);
}

// A V shape's overlapped pairs carry the backward of another stage: the profile says which, and
// the simulation of the profile gives each pair the time it took.
TEST(DeviceProfile, AVShapesPairsKeepTheirMeasuredTime) {
  const Schedule s = generate({"dualpipev", 2, 8});
  std::vector<StageCost> parts;
  for (double scale : {1.0, 1.5, 0.7, 0.1}) {  // the last, the loss head, cheapest
    StageCost c;
    c.f = scale, c.i = c.w = scale, c.b = 2 * scale, c.fb = 3 * scale - 0.4 * scale;
    parts.push_back(c);
  }
  const Trace t = simulate(s, schedule_cost_model(s.placement, parts));
  const nlohmann::json written = profile_json(t, s.placement, "2,2,1,1");
  // Rank 0 pairs a forward of stage 0 with a backward of stage 3, and the reverse.
  EXPECT_EQ(written["stages"][0]["FB_backward"], nlohmann::json({{"stage", 3}, {"op", "B"}}));
  EXPECT_EQ(written["stages"][3]["FB_backward"], nlohmann::json({{"stage", 0}, {"op", "B"}}));
  const DeviceProfile p = parse_device_profile(written, "v.json");
  const WorkloadSpec spec = build_mlp({6, 8, 0, 4}, 1, DType::kF32);
  const PartitionPlan plan = partition(spec, 4, "2,2,1,1");
  const Trace again = simulate(s, schedule_cost_model(s.placement, stage_costs(spec, plan, p)));
  ASSERT_EQ(again.compute.size(), t.compute.size());
  for (std::size_t k = 0; k < t.compute.size(); ++k) {
    EXPECT_NEAR(again.compute[k].start, t.compute[k].start, 1e-9) << to_string(t.compute[k].action);
    EXPECT_NEAR(again.compute[k].end, t.compute[k].end, 1e-9) << to_string(t.compute[k].action);
  }
  nlohmann::json bad = written;
  bad["stages"][0]["FB_backward"] = {{"stage", 4}, {"op", "B"}};
  EXPECT_THROW(parse_device_profile(bad, "v.json"), UsageError);
  // An order of one's own may pair a stage's forwards with backwards of several stages: the
  // profile then keeps FB as the pairs' median alone, and still writes.
  Trace mixed = t;
  for (ComputeEvent& e : mixed.compute)
    if (e.action.paired() && e.action.task.stage == 0) {
      e.action.partner.stage = 1;
      break;
    }
  const nlohmann::json kept = profile_json(mixed, s.placement, "2,2,1,1");
  EXPECT_FALSE(kept["stages"][0].contains("FB_backward"));
  EXPECT_TRUE(kept["stages"][3].contains("FB_backward"));
}

// The optimizer steps a run took travel through its measured profile: simulated after each
// stage's last backward, written as each stage's median, read back, and placed by the simulation
// of the profile where the executors run them, so that the replay's busy time returns.
TEST(DeviceProfile, OptimizerStepsGoThroughTheProfileIntoTheSimulation) {
  for (const char* family : {"1f1b", "zb-h1", "chimera"}) {
    const Schedule s = generate({family, 2, 4});
    const std::vector<StageCost> parts(2);  // F 1, B 2 (I = W = 1)
    const std::vector<double> seconds = {0.5, 0.25};
    const std::vector<OptimizerStep> steps = optimizer_steps_after_backwards(s, seconds);
    // One update per schedule stage (chimera's two copies of each part: two each), placed after
    // the last action of that stage that is not a forward.
    ASSERT_EQ(steps.size(), static_cast<std::size_t>(s.stages())) << family;
    for (const OptimizerStep& o : steps) {
      const auto& order = s.ranks[static_cast<std::size_t>(o.rank)];
      auto backward_of = [&](const Action& a) {
        return (a.task.stage == o.stage && a.task.op != Op::F) ||
               (a.paired() && a.partner.stage == o.stage && a.partner.op != Op::F);
      };
      EXPECT_TRUE(backward_of(order[o.position])) << family;
      for (std::size_t i = o.position + 1; i < order.size(); ++i)
        EXPECT_FALSE(backward_of(order[i])) << family << " rank " << o.rank;
      EXPECT_EQ(o.duration, seconds.at(static_cast<std::size_t>(s.placement.part(o.stage))));
    }
    const CostModel costs = schedule_cost_model(s.placement, parts);
    const Trace t = simulate(s, costs, {.optimizer_steps = steps});
    const DeviceProfile p = parse_device_profile(profile_json(t, s.placement, "3,3"), "t.json");
    EXPECT_EQ(p.optimizer, seconds) << family;
    const Trace again =
        simulate(s, costs, {.optimizer_steps = optimizer_steps_after_backwards(s, p.optimizer)});
    EXPECT_EQ(again.updates.size(), t.updates.size());
    EXPECT_DOUBLE_EQ(compute_metrics(again, s.placement).total_busy,
                     compute_metrics(t, s.placement).total_busy);
  }
  // A step without updates writes none, and reads back none.
  const Schedule s = generate({"1f1b", 2, 4});
  const Trace t = simulate(s, schedule_cost_model(s.placement, std::vector<StageCost>(2)));
  const nlohmann::json j = profile_json(t, s.placement, "3,3");
  EXPECT_FALSE(j["stages"][0].contains("optimizer"));
  EXPECT_TRUE(parse_device_profile(j, "t.json").optimizer.empty());
  // Every stage or none.
  nlohmann::json half = j;
  half["stages"][1]["optimizer"] = 0.1;
  EXPECT_THROW(parse_device_profile(half, "t.json"), UsageError);
  half["stages"][0]["optimizer"] = -1;
  EXPECT_THROW(parse_device_profile(half, "t.json"), UsageError);
}

std::string refusal(const nlohmann::json& j) {
  try {
    parse_device_profile(j, "p.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(DeviceProfile, BadProfilesNameTheKey) {
  const nlohmann::json good = {{"format", "ppbench-device-profile"},
                               {"version", 1},
                               {"kind", "rates"},
                               {"peak_flops", 1e12},
                               {"memory_bandwidth", 1e11},
                               {"link_bandwidth", 1e10},
                               {"link_latency", 0}};
  EXPECT_EQ(parse_device_profile(good, "p.json").rates.peak_flops, 1e12);
  auto without = [&](const char* key) {
    nlohmann::json j = good;
    j.erase(key);
    return j;
  };
  auto with = [&](const char* key, const nlohmann::json& v) {
    nlohmann::json j = good;
    j[key] = v;
    return j;
  };
  EXPECT_NE(refusal(without("peak_flops")).find("'peak_flops' is missing"), std::string::npos);
  EXPECT_NE(refusal(with("memory_bandwidth", 0)).find("'memory_bandwidth'"), std::string::npos);
  EXPECT_NE(refusal(with("link_bandwidth", "fast")).find("'link_bandwidth'"), std::string::npos);
  EXPECT_NE(refusal(with("link_latency", -1)).find("'link_latency'"), std::string::npos);
  EXPECT_NE(refusal(with("kind", "guess")).find("'kind'"), std::string::npos);
  EXPECT_NE(refusal(with("version", 2)).find("'version'"), std::string::npos);
  EXPECT_NE(refusal(nlohmann::json::array()).find("one JSON object"), std::string::npos);
}

}  // namespace
}  // namespace ppbench
