// The optimizer step on the CUDA backend (`run --backend cuda --optimizer sgd|adamw`): two
// training steps of every schedule on D = 2 virtual devices (and of Chimera, DualPipe and a few
// others in bf16 on a transformer), with the update after each stage's last backward, give the
// loss and gradients of two steps on one device of the CPU backend (float64): the second step's
// values depend on the first step's update, every copy of a part included. One update per model
// part shows on the trace; the record has the measured memory beside the model. A captured CUDA
// graph replays the AdamW step with its counter stepping on. GPU tests skip without a GPU; the
// guard that the first update changes the reference visibly runs everywhere.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/backends/cpu/cpu_run.h"
#include "harness/cuda/cuda_run.h"
#include "schedules/registry.h"
#include "tests/cuda_exec/gpu_watchdog.h"
#include "tests/cuda_exec/run_matches_cpu.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

WorkloadSpec tiny_mlp(DType dtype) {
  MlpConfig c;
  c.layers = 8, c.width = 32, c.input_dim = 16, c.classes = 5;
  return build_mlp(c, 4, dtype);
}

WorkloadSpec tiny_transformer(DType dtype) {
  TransformerConfig c = transformer_preset("tiny-llama");
  c.layers = 6, c.hidden = 64, c.ffn = 96, c.heads = 4, c.kv_heads = 2, c.vocab = 61, c.seq = 13;
  return build_transformer(c, 2, dtype);
}

OptimizerOptions optimizer(OptimizerOptions::Kind kind) {
  OptimizerOptions o;
  o.kind = kind;
  // SGD's step scales with the gradient: a large rate makes it visible. AdamW's first steps are
  // about lr * sign(g) whatever the gradient's size; where f32 and float64 disagree on the sign
  // of a near-zero gradient, the two references part by 2 lr: the default rate keeps that small.
  o.lr = kind == OptimizerOptions::Kind::kSgd ? 0.05 : 1e-3;
  return o;
}

// AdamW: see optimizer(); the rest as the forward-backward equivalence (test_equivalence.cpp).
double tolerance(DType d, OptimizerOptions::Kind kind) {
  if (d == DType::kBF16) return 5e-2;
  return kind == OptimizerOptions::Kind::kAdamW ? 1e-3 : 1e-4;
}

constexpr int kMicrobatches = 8;
constexpr std::uint64_t kSeed = 77;

// The comparison can fail: the first update moves the second step's gradients by far more than
// the tolerance (a run that skipped its updates would be caught).
TEST(CudaOptimizerReference, TheFirstUpdateMovesTheSecondStepBeyondTheTolerance) {
  for (auto kind : {OptimizerOptions::Kind::kSgd, OptimizerOptions::Kind::kAdamW})
    for (bool mlp : {true, false}) {
      const WorkloadSpec spec = mlp ? tiny_mlp(DType::kF32) : tiny_transformer(DType::kF32);
      const StepValues one = single_device_step(spec, kMicrobatches, kSeed, 1, optimizer(kind));
      const StepValues two = single_device_step(spec, kMicrobatches, kSeed, 2, optimizer(kind));
      const GradientComparison c = compare_gradients(two.tensors, one.tensors);
      EXPECT_GT(c.max_rel_error, 10 * tolerance(DType::kF32, kind))
          << to_string(kind) << (mlp ? " mlp" : " transformer");
    }
}

class CudaOptimizerEquivalence : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  }
};

// Two steps (one warm-up, one measured) of `p` on D virtual devices against two on one device.
void expect_two_steps_match(const WorkloadSpec& spec, const ScheduleParams& p,
                            OptimizerOptions::Kind kind, const std::string& label) {
  CudaRunOptions o;
  o.run.schedule = p;
  o.run.seed = kSeed;
  o.run.warmup = 1;
  o.run.steps = 1;
  o.run.optimizer = optimizer(kind);
  o.run.executor.watchdog_seconds = ppbench::gpu_test_watchdog_seconds();
  o.virtual_devices = p.devices;
  o.activation_arena_bytes = std::size_t{256} << 20;
  const std::optional<RunOutput> out =
      run_and_compare_with_cpu(spec, o, tolerance(spec.dtype, kind), label);
  if (!out) return;
  // One update per model part (a part's two copies are updated together), each inside the step.
  const Schedule s = generate(p);
  EXPECT_EQ(out->trace.updates.size(), static_cast<std::size_t>(s.placement.stages_per_chain()))
      << label;
  std::vector<int> updated;
  for (const UpdateEvent& u : out->trace.updates) {
    EXPECT_EQ(s.placement.stage_rank.at(static_cast<std::size_t>(u.stage)), u.rank) << label;
    updated.push_back(s.placement.part(u.stage));
  }
  std::sort(updated.begin(), updated.end());
  for (std::size_t k = 0; k < updated.size(); ++k)
    EXPECT_EQ(updated[k], static_cast<int>(k)) << label << ": every part updated once";
  EXPECT_EQ(out->record["optimizer"]["name"], to_string(kind)) << label;
  // Measured beside the model (ppbench memory --backend cuda's): the parameter bytes and the f32
  // gradients' are the model's; AdamW's moments (and bf16's master copies) are the model's
  // optimizer bytes, every copy's; SGD keeps none.
  const nlohmann::json& ranks = out->record["memory"]["ranks"];
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(p.devices)) << label;
  for (const auto& r : ranks) {
    const auto& got = r["measured"];
    const auto& want = r["model"];
    EXPECT_EQ(got["params"].get<double>(), want["params"].get<double>()) << label;
    EXPECT_EQ(got["grads"].get<double>(), want["grads"].get<double>()) << label;
    EXPECT_EQ(got["optimizer"].get<double>(), want["optimizer"].get<double>()) << label;
    EXPECT_GT(got["activations"].get<double>(), 0) << label;
  }
  const nlohmann::json& device = out->record["memory"]["device"];
  ASSERT_EQ(device["gpus"].size(), 1u) << label;  // virtual devices: one GPU
  EXPECT_GT(device["gpus"][0]["run_bytes"].get<double>(), 0) << label;
  EXPECT_EQ(device["arenas"].size(), static_cast<std::size_t>(p.devices)) << label;
}

TEST_F(CudaOptimizerEquivalence, TwoAdamWAndTwoSgdStepsOfEveryScheduleMatchOneDevice) {
  for (auto kind : {OptimizerOptions::Kind::kAdamW, OptimizerOptions::Kind::kSgd}) {
    int ran = 0;
    for (const auto& info : all_schedules()) {
      ScheduleParams p{std::string(info.name), 2, kMicrobatches, info.uses_chunks ? 2 : 0, 0};
      try {
        generate(p);
      } catch (const UsageError&) {
        continue;
      }
      expect_two_steps_match(tiny_mlp(DType::kF32), p, kind,
                             p.name + " " + to_string(kind) + " mlp f32");
      ++ran;
    }
    EXPECT_GT(ran, 15) << to_string(kind);
  }
}

// bf16 parameters (AdamW on f32 master copies) and a transformer, at D = 4, where Chimera and
// DualPipe's twin copies sit on different ranks.
TEST_F(CudaOptimizerEquivalence, Bf16TransformerFamiliesMatchOneDevice) {
  for (const char* name : {"1f1b", "chimera", "dualpipe", "zb-v", "interleaved-1f1b"})
    for (auto kind : {OptimizerOptions::Kind::kAdamW, OptimizerOptions::Kind::kSgd}) {
      const ScheduleInfo& info = find_schedule(name);
      ScheduleParams p{name, 4, kMicrobatches, info.uses_chunks ? 2 : 0, 0};
      expect_two_steps_match(tiny_transformer(DType::kBF16), p, kind,
                             std::string(name) + " " + to_string(kind) + " transformer bf16");
    }
}

// A captured step replays the update: three measured steps from one capture equal four steps on
// one device (one eager warm-up step, then the graph launched three times).
TEST_F(CudaOptimizerEquivalence, CudaGraphReplaysStepTheOptimizerOn) {
  for (auto kind : {OptimizerOptions::Kind::kAdamW, OptimizerOptions::Kind::kSgd}) {
    CudaRunOptions o;
    o.run.schedule = {"naive", 1, 4, 0, 0};
    o.run.seed = kSeed;
    o.run.warmup = 1;
    o.run.steps = 3;
    o.run.optimizer = optimizer(kind);
    o.cuda_graph = true;
    const std::string label = std::string("naive graph ") + to_string(kind);
    const std::optional<RunOutput> out =
        run_and_compare_with_cpu(tiny_mlp(DType::kF32), o, tolerance(DType::kF32, kind), label);
    if (!out) continue;
    EXPECT_TRUE(out->record["gpu"]["cuda_graph"]["enabled"].get<bool>()) << label;
    if (out->record["gpu"]["cuda_graph"]["per_action_timings_from_graph"].get<bool>()) {
      EXPECT_EQ(out->trace.updates.size(), 1u) << label;
    }
  }
}

}  // namespace
}  // namespace ppbench
