// The whole-step memory model (harness/step_memory.h) against bytes computed by hand for a tiny
// MLP: 4 linear layers, width 8, input 8, 4 classes, b = 2, f32 (e = 4), split "2,2":
//   block (8 -> 8): 72 params, M_B = M_W = e b (8 + 8) = 128, sends e b 8 = 64 bytes
//   head  (8 -> 4): 36 params, M_B = e b (8 + 4 + 1) = 104, M_W = e b (8 + 4) = 96
//   part 0 = block0, block1: 144 params, M_B 256, M_W 256, output 64 bytes
//   part 1 = block2, head:   108 params, M_B 232, M_W 224, output 0
#include <cstdint>
#include <numeric>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/backends/run_record.h"
#include "harness/step_memory.h"
#include "schedules/registry.h"
#include "schedules/schedule_file.h"
#include "workloads/mlp.h"
#include "workloads/partition.h"

namespace ppbench {
namespace {

WorkloadSpec tiny_mlp(DType dtype = DType::kF32) {
  return build_mlp({.layers = 4, .width = 8, .input_dim = 8, .classes = 4}, 2, dtype);
}

Schedule make(const char* name, int d, int n) {
  ScheduleParams p;
  p.name = name;
  p.devices = d;
  p.microbatches = n;
  return generate(p);
}

StepMemory model(const WorkloadSpec& spec, const Schedule& s, StepMemoryOptions o) {
  return step_memory(spec, s, partition(spec, s.placement.stages_per_chain(), "2,2"), o);
}

TEST(StepMemory, ThePartsAreThoseComputedByHand) {
  const WorkloadSpec spec = tiny_mlp();
  const PartitionPlan plan = partition(spec, 2, "2,2");
  ASSERT_EQ(plan.stages[0].params, 144);
  ASSERT_EQ(plan.stages[1].params, 108);
  ASSERT_EQ(plan.stages[0].activation.b, 256);
  ASSERT_EQ(plan.stages[1].activation.b, 232);
  ASSERT_EQ(plan.stages[0].boundary_bytes_out, 64);
}

TEST(StepMemory, BytesPerParameterFollowTheConvention) {
  const ParameterBytes bf16 = parameter_bytes(DType::kBF16, Optimizer::kAdamW);
  EXPECT_EQ(bf16.param, 2);
  EXPECT_EQ(bf16.grad, 2);
  EXPECT_EQ(bf16.optimizer, 12);  // m, v at fp32 and the fp32 master copy
  EXPECT_EQ(bf16.master, 4);
  const ParameterBytes f32 = parameter_bytes(DType::kF32, Optimizer::kAdamW);
  EXPECT_EQ(f32.optimizer, 8);  // the parameters are fp32 already: no master copy
  EXPECT_EQ(f32.master, 0);
  EXPECT_EQ(parameter_bytes(DType::kF64, Optimizer::kAdamW).optimizer, 16);
  // SGD keeps no moments, but bf16 parameters are stepped on an fp32 master copy as under AdamW.
  EXPECT_EQ(parameter_bytes(DType::kBF16, Optimizer::kSgd).optimizer, 4);
  EXPECT_EQ(parameter_bytes(DType::kBF16, Optimizer::kSgd).master, 4);
  EXPECT_EQ(parameter_bytes(DType::kF32, Optimizer::kSgd).optimizer, 0);
  EXPECT_EQ(parameter_bytes(DType::kBF16, Optimizer::kNone).master, 0);
  EXPECT_EQ(parameter_bytes(DType::kBF16, Optimizer::kNone).optimizer, 0);
  EXPECT_EQ(parameter_bytes(DType::kF64, Optimizer::kNone).grad, 8);
}

// 1F1B, D = 2, N = 4. Rank 0 runs F0 F1 B0 F2 B1 F3 B2 B3: two micro-batches of part 0 alive
// at most (512 bytes); rank 1 alternates F and B: one of part 1 (232). Each rank sends four
// 64-byte messages to the other (activations forward, their gradients back): with capacity 4,
// all four, 256 bytes in flight each; with capacity 2, two in the mailbox and one waiting, 192.
TEST(StepMemory, OneFOneBAdamWByHand) {
  const WorkloadSpec spec = tiny_mlp();
  const Schedule s = make("1f1b", 2, 4);
  const StepMemory m = model(spec, s, {Optimizer::kAdamW, false, 4});
  ASSERT_EQ(m.ranks.size(), 2u);
  const RankMemory& r0 = m.ranks[0];
  const RankMemory& r1 = m.ranks[1];
  EXPECT_EQ(r0.parts, (std::vector<int>{0}));
  EXPECT_EQ(r1.parts, (std::vector<int>{1}));
  EXPECT_EQ(r0.param_count, 144);
  EXPECT_EQ(r1.param_count, 108);
  EXPECT_EQ(r0.params, 144 * 4);
  EXPECT_EQ(r0.grads, 144 * 4);
  EXPECT_EQ(r0.optimizer, 144 * 8);
  EXPECT_EQ(r0.activations, 512);
  EXPECT_EQ(r0.comm, 256);
  EXPECT_EQ(r0.total(), 576 + 576 + 1152 + 512 + 256);
  EXPECT_EQ(r1.params, 108 * 4);
  EXPECT_EQ(r1.grads, 108 * 4);
  EXPECT_EQ(r1.optimizer, 108 * 8);
  EXPECT_EQ(r1.activations, 232);
  EXPECT_EQ(r1.comm, 256);
  EXPECT_EQ(r1.total(), 432 + 432 + 864 + 232 + 256);
  EXPECT_EQ(m.largest_total(), r0.total());
  // The ranks together hold the whole model once.
  EXPECT_EQ(r0.param_count + r1.param_count, spec.params());

  const StepMemory small_channel = model(spec, s, {Optimizer::kAdamW, false, 2});
  EXPECT_EQ(small_channel.ranks[0].comm, 192);
  EXPECT_EQ(small_channel.ranks[1].comm, 192);
}

TEST(StepMemory, NoOptimizerAndSgdOnFp32HoldNoStates) {
  const WorkloadSpec spec = tiny_mlp();
  const Schedule s = make("1f1b", 2, 4);
  for (Optimizer o : {Optimizer::kNone, Optimizer::kSgd}) {
    const StepMemory m = model(spec, s, {o, false, 4});
    EXPECT_EQ(m.ranks[0].optimizer, 0);
    EXPECT_EQ(m.ranks[1].optimizer, 0);
    EXPECT_EQ(m.ranks[0].total(), 576 + 576 + 512 + 256);
    EXPECT_EQ(m.ranks[1].total(), 432 + 432 + 232 + 256);
  }
}

// bf16 with adamw: 2 + 2 + 12 bytes per parameter, activations and messages at 2 bytes.
TEST(StepMemory, Bf16AdamWKeepsAnFp32MasterCopy) {
  const WorkloadSpec spec = tiny_mlp(DType::kBF16);
  const StepMemory m = model(spec, make("1f1b", 2, 4), {Optimizer::kAdamW, false, 4});
  EXPECT_EQ(m.ranks[0].params, 144 * 2);
  EXPECT_EQ(m.ranks[0].grads, 144 * 2);
  EXPECT_EQ(m.ranks[0].optimizer, 144 * 12);
  EXPECT_EQ(m.ranks[0].activations, 256);
  EXPECT_EQ(m.ranks[0].comm, 128);
  EXPECT_EQ(m.ranks[1].optimizer, 108 * 12);
}

// With --recompute F keeps only the stage input (part 0: none, its input is data; part 1: the
// 64-byte boundary), and a backward first rebuilds the stage's M_B in place of that input. Rank
// 0 keeps nothing between passes, so its peak is one rebuilt stage (256); 1F1B's rank 1 holds one
// input when its backward starts, which the rebuild replaces (64 - 64 + 232).
TEST(StepMemory, RecomputeKeepsInputsAndPeaksInTheRebuiltStage) {
  const WorkloadSpec spec = tiny_mlp();
  const StepMemory m = model(spec, make("1f1b", 2, 4), {Optimizer::kNone, true, 4});
  EXPECT_EQ(m.ranks[0].activations, 256);
  EXPECT_EQ(m.ranks[1].activations, 232);
  // GPipe's rank 1 holds all four inputs when the first backward rebuilds: 4 x 64 - 64 + 232.
  EXPECT_EQ(model(spec, make("gpipe", 2, 4), {Optimizer::kNone, true, 4}).ranks[1].activations,
            4 * 64 - 64 + 232);
}

// Chimera, D = 2, N = 4: chain 0 puts part 0 on rank 0 and part 1 on rank 1, chain 1 the
// reverse, so each rank holds the whole model (both copies counted: 252 parameters each, the
// ranks together twice the model). Every message either way is a 64-byte part-0 output or its
// gradient, four each way: 256 bytes. Its order at this size is
//   rank 0: F0.0 F3.0 B3.0 B0.0 F0.1 F3.1 B3.1 B0.1
//   rank 1: F2.0 F1.0 B1.0 B2.0 F2.1 F1.1 B1.1 B2.1
// so each rank peaks with one micro-batch of each part alive: 256 + 232 = 488 bytes.
TEST(StepMemory, ChimeraCountsBothCopies) {
  const WorkloadSpec spec = tiny_mlp();
  const Schedule s = make("chimera", 2, 4);
  const StepMemory m = model(spec, s, {Optimizer::kAdamW, false, 4});
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].parts, (std::vector<int>{0, 1}));
  EXPECT_EQ(m.ranks[1].parts, (std::vector<int>{1, 0}));
  for (const RankMemory& r : m.ranks) {
    EXPECT_EQ(r.param_count, 252);
    EXPECT_EQ(r.params, 252 * 4);
    EXPECT_EQ(r.grads, 252 * 4);
    EXPECT_EQ(r.optimizer, 252 * 8);
    EXPECT_EQ(r.comm, 256);
  }
  EXPECT_EQ(m.ranks[0].param_count + m.ranks[1].param_count, 2 * spec.params());
  EXPECT_EQ(m.ranks[0].activations, 488);
  EXPECT_EQ(m.ranks[1].activations, 488);
  const StepMemory none = model(spec, s, {Optimizer::kNone, false, 4});
  EXPECT_EQ(none.ranks[0].total(), m.ranks[0].total() - 252 * 8);
}

// The activation term is the schedule's peak from the activation model, for every family.
TEST(StepMemory, ActivationsAreTheSchedulesPeakForEveryFamily) {
  const WorkloadSpec spec = build_mlp({.layers = 16, .width = 8}, 2, DType::kF32);
  for (const ScheduleInfo& info : all_schedules()) {
    SCOPED_TRACE(info.name);
    ScheduleParams p;
    p.name = std::string(info.name);
    p.devices = 4;
    p.microbatches = 8;
    const Schedule s = generate(p);
    const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), "balanced");
    const StepMemory m = step_memory(spec, s, plan, {Optimizer::kAdamW, false, 4});
    const std::vector<double> peaks = predicted_peak_bytes(s, plan, false);
    int64_t held = 0;
    for (std::size_t r = 0; r < m.ranks.size(); ++r) {
      EXPECT_EQ(static_cast<double>(m.ranks[r].activations), peaks[r]);
      EXPECT_GT(m.ranks[r].activations, 0);
      held += m.ranks[r].param_count;
    }
    EXPECT_EQ(held, spec.params() * s.placement.chains());
  }
}

// Two moments within an action, in the model as in the CPU backend's measurement: between an
// overlapped pair's halves the new forward's activations and the backward's micro-batch's are
// held at once; with recompute a forward holds its stage's whole M_B until it ends, on top of
// the M_W that wait for their W.
TEST(PredictedPeak, CountsTheMomentsWithinAnAction) {
  const WorkloadSpec spec = build_mlp({.layers = 2, .width = 8}, 2, DType::kF32);
  const PartitionPlan plan = partition(spec, 1, "balanced");
  const double mb = static_cast<double>(plan.stages[0].activation.b);
  const double mw = static_cast<double>(plan.stages[0].activation.w);
  ASSERT_GT(mw, 0);
  const auto schedule = [](std::string_view text) {
    return parse_schedule_file(text, "t.txt", ScheduleFileFormat::kText).schedule;
  };
  // After F0.0 one M_B; midway through the pair two; after it one again.
  EXPECT_EQ(predicted_peak_bytes(schedule("rank 0: F0.0 (F0.1+B0.0) B0.1\n"), plan, false),
            std::vector<double>{2 * mb});
  // The first stage keeps no input under recompute: F0.1 runs while I0.0's M_W waits.
  EXPECT_EQ(predicted_peak_bytes(schedule("rank 0: F0.0 I0.0 F0.1 W0.0 I0.1 W0.1\n"), plan, true),
            std::vector<double>{mw + mb});
}

TEST(StepMemory, UnknownOptimizerIsAUsageErrorNamingIt) {
  try {
    parse_optimizer("adam");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'adam'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("adamw"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_optimizer("sgd"), Optimizer::kSgd);
}

}  // namespace
}  // namespace ppbench
