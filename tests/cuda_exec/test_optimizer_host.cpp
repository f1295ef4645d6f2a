// What the CUDA backend's optimizer step decides on the host, without a GPU: the options it
// takes (sgd and adamw, no longer refused) and the one it refuses (--cuda-graph where a part has
// two copies), the device memory it reserves beside the activation arena, the record's
// "memory.device" section, and the optimizer steps placed on the trace's time base.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/cuda_run.h"
#include "harness/cuda/gpu_memory.h"
#include "harness/cuda/gpu_optimizer.h"
#include "harness/cuda/trace_align.h"
#include "schedules/registry.h"
#include "workloads/mlp.h"
#include "workloads/partition.h"

namespace ppbench {
namespace {

WorkloadSpec tiny_mlp(DType dtype) {
  MlpConfig c;
  c.layers = 8, c.width = 32, c.input_dim = 16, c.classes = 5;
  return build_mlp(c, 4, dtype);
}

std::string usage_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaOptimizerHost, RunOptionsTakeSgdAndAdamW) {
  for (auto kind : {OptimizerOptions::Kind::kNone, OptimizerOptions::Kind::kSgd,
                    OptimizerOptions::Kind::kAdamW})
    for (bool graph : {false, true}) {
      CudaRunOptions o;
      o.run.schedule = {"1f1b", 2, 4, 0, 0};
      o.run.optimizer.kind = kind;
      o.cuda_graph = graph;
      EXPECT_EQ(usage_message([&] { check_cuda_run_options(tiny_mlp(DType::kF32), o); }), "")
          << to_string(kind) << (graph ? " with --cuda-graph" : "");
      EXPECT_EQ(usage_message([&] {
                  cuda::check_gpu_optimizer(generate(o.run.schedule).placement, o.run.optimizer,
                                            graph);
                }),
                "")
          << to_string(kind);
    }
}

TEST(CudaOptimizerHost, CudaGraphWithTwoCopiesOfAPartIsRefusedInOneLine) {
  for (const char* name : {"chimera", "dualpipe"}) {
    const Placement p = generate({name, 4, 8, 0, 0}).placement;
    OptimizerOptions o;
    for (auto kind : {OptimizerOptions::Kind::kSgd, OptimizerOptions::Kind::kAdamW}) {
      o.kind = kind;
      const std::string m = usage_message([&] { cuda::check_gpu_optimizer(p, o, true); });
      EXPECT_NE(m.find("--cuda-graph with --optimizer " + to_string(kind)), std::string::npos)
          << name << ": " << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      // Eager, or without an optimizer, the same schedule runs.
      EXPECT_EQ(usage_message([&] { cuda::check_gpu_optimizer(p, o, false); }), "") << name;
    }
    o.kind = OptimizerOptions::Kind::kNone;
    EXPECT_EQ(usage_message([&] { cuda::check_gpu_optimizer(p, o, true); }), "") << name;
  }
}

TEST(CudaOptimizerHost, ReservesTheStatesOfEveryHeldCopy) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const WorkloadSpec spec = tiny_mlp(dt);
    for (const char* name : {"1f1b", "chimera"}) {
      const Schedule s = generate({name, 4, 8, 0, 0});
      const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), "uniform");
      for (int r = 0; r < 4; ++r) {
        std::int64_t params = 0;
        for (int st = 0; st < s.placement.stages(); ++st)
          if (s.placement.stage_rank[st] == r)
            params += plan.stages[static_cast<std::size_t>(
                                      st - s.placement.chain_begin.at(s.placement.stage_chain[st]))]
                          .params;
        auto reserve = [&](OptimizerOptions::Kind k) {
          return static_cast<double>(cuda::optimizer_reserve_bytes(spec, plan, s.placement, r, k));
        };
        const double per = dt == DType::kBF16 ? 12 : 8;  // m, v (and the master) in f32
        EXPECT_EQ(reserve(OptimizerOptions::Kind::kNone), 0) << name;
        EXPECT_GE(reserve(OptimizerOptions::Kind::kAdamW), per * static_cast<double>(params))
            << name << " rank " << r;
        EXPECT_GT(reserve(OptimizerOptions::Kind::kAdamW), reserve(OptimizerOptions::Kind::kSgd))
            << name;
        // SGD on bf16: the f32 master copy, 4 bytes per parameter more than on f32.
        if (dt == DType::kBF16) {
          const WorkloadSpec f32 = tiny_mlp(DType::kF32);
          EXPECT_EQ(reserve(OptimizerOptions::Kind::kSgd) -
                        static_cast<double>(cuda::optimizer_reserve_bytes(
                            f32, plan, s.placement, r, OptimizerOptions::Kind::kSgd)),
                    4 * static_cast<double>(params))
              << name << " rank " << r;
        }
      }
    }
  }
}

TEST(CudaOptimizerHost, DeviceMemoryRecordHasEveryGpuAndArena) {
  const nlohmann::json j =
      cuda::device_memory_json({{0, 80e9, 1e9}}, {{0, 80e9, 3.5e9}}, {{1e9, 2e8}, {1e9, 3e8}});
  ASSERT_EQ(j["gpus"].size(), 1u);
  EXPECT_EQ(j["gpus"][0]["gpu"], 0);
  EXPECT_EQ(j["gpus"][0]["total_bytes"].get<double>(), 80e9);
  EXPECT_EQ(j["gpus"][0]["used_before_bytes"].get<double>(), 1e9);
  EXPECT_EQ(j["gpus"][0]["used_after_bytes"].get<double>(), 3.5e9);
  EXPECT_EQ(j["gpus"][0]["run_bytes"].get<double>(), 2.5e9);
  ASSERT_EQ(j["arenas"].size(), 2u);
  EXPECT_EQ(j["arenas"][1]["rank"], 1);
  EXPECT_EQ(j["arenas"][1]["capacity_bytes"].get<double>(), 1e9);
  EXPECT_EQ(j["arenas"][1]["peak_bytes"].get<double>(), 3e8);
  EXPECT_TRUE(j["note"].is_string());
  // Before and after must name the same GPUs.
  EXPECT_THROW(cuda::device_memory_json({{0, 1, 0}}, {}, {}), std::invalid_argument);
  EXPECT_THROW(cuda::device_memory_json({{0, 1, 0}}, {{1, 1, 0}}, {}), std::invalid_argument);
}

TEST(CudaOptimizerHost, UpdatesTakeTheirRanksTimeBase) {
  const std::vector<RankStart> starts = {{0, 100.0}, {1, 100.5}};
  const Trace t = align_gpu_trace(2, starts, {}, {}, {{1, 2.0f, 3.0f, 4}, {0, 1.0f, 1.5f, 0}});
  ASSERT_EQ(t.updates.size(), 2u);
  // Grouped by rank; rank 1 started 0.5 s after rank 0.
  EXPECT_EQ(t.updates[0].rank, 0);
  EXPECT_DOUBLE_EQ(t.updates[0].start, 1e-3);
  EXPECT_EQ(t.updates[1].stage, 4);
  EXPECT_DOUBLE_EQ(t.updates[1].start, 0.5 + 2e-3);
  EXPECT_DOUBLE_EQ(t.updates[1].end, 0.5 + 3e-3);
  EXPECT_THROW(align_gpu_trace(2, starts, {}, {}, {{0, 2.0f, 1.0f, 0}}), std::invalid_argument);
  EXPECT_THROW(align_gpu_trace(2, starts, {}, {}, {{2, 0.0f, 1.0f, 0}}), std::invalid_argument);
}

}  // namespace
}  // namespace ppbench
