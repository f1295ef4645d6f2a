// Any sound order computes the step, not only the orders the generators write.
//
// Each family's schedule is edited at random, as a researcher edits a generated schedule by hand
// (tests/common/schedule_edits.h: adjacent swaps, moves within a rank, a B split into I and a W at
// the rank's end, a forward paired with a later backward, a pair split), keeping only the edits
// after which validate() still accepts it for a run. It then reaches the backend the way a
// researcher's file does, through its text form, and runs on CPU threads. The loss and every
// parameter gradient must equal the single-device step's (float64, to 1e-10), after two AdamW
// steps too; what each rank held (parameters, gradients, optimizer states, the arena's activation
// peak) must equal the memory model's, and the bytes in flight stay within its bound.
//
// Why: the generators' orders are regular (a stage's forwards in micro-batch order, a W soon
// after its I, overlapped pairs only in DualPipe's). An executor, a transport or a memory model
// that leaned on such regularity would pass every generated order and fail here.
#include <cmath>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/backends/cpu/cpu_run.h"
#include "schedules/registry.h"
#include "schedules/schedule_file.h"
#include "tests/common/edited_run.h"
#include "tests/common/pipeline_workloads.h"
#include "tests/common/schedule_edits.h"

namespace ppbench {
namespace {

// How a variant of the run differs: plain, recomputing activations, or two AdamW steps.
enum class Variant { kPlain, kRecompute, kTwoAdamWSteps };

const char* name_of(Variant v) {
  switch (v) {
    case Variant::kPlain:
      return "plain";
    case Variant::kRecompute:
      return "recompute";
    case Variant::kTwoAdamWSteps:
      return "two adamw steps";
  }
  return "?";
}

void expect_every_sound_edit_computes_the_step(const WorkloadSpec& spec, std::uint32_t seed) {
  constexpr std::uint64_t kSeed = 7;
  constexpr int kMicrobatches = 8;
  constexpr int kEditsPerSchedule = 12;
  // The reference, by number of optimizer steps.
  OptimizerOptions adamw;
  adamw.kind = OptimizerOptions::Kind::kAdamW;
  const StepValues one_step = single_device_step(spec, kMicrobatches, kSeed);
  const StepValues two_steps = single_device_step(spec, kMicrobatches, kSeed, 2, adamw);

  std::mt19937 rng(seed);
  int runs = 0, edits_made = 0;
  std::map<std::string, int> runs_by_family;
  for (const ScheduleInfo& info : all_schedules())
    for (int d : {2, 4})
      for (Variant variant : {Variant::kPlain, Variant::kRecompute, Variant::kTwoAdamWSteps}) {
        const std::string family(info.name);
        const ScheduleParams p{family, d, kMicrobatches, info.uses_chunks ? 2 : 0, 0};
        Schedule s;
        try {
          s = generate(p);
        } catch (const UsageError&) {
          continue;  // a combination the family refuses
        }
        const Schedule generated = s;
        const int made = edits::random_sound_edits(s, rng, kEditsPerSchedule);
        const std::string label = family + " D=" + std::to_string(d) + " " + name_of(variant) +
                                  ", " + std::to_string(made) + " edits:\n" + to_schedule_text(s);
        if (made == 0) {
          ADD_FAILURE() << label << "no edit kept the schedule sound";
          continue;
        }
        EXPECT_NE(s.ranks, generated.ranks) << label;
        edits_made += made;

        RunOptions o = edits::run_options_for_file(s);
        ASSERT_EQ(o.file_schedule->ranks, s.ranks) << label;
        o.seed = kSeed;
        o.executor.watchdog_seconds = 30;
        o.keep_gradients = true;
        o.recompute = variant == Variant::kRecompute;
        if (variant == Variant::kTwoAdamWSteps) {
          o.optimizer = adamw;
          o.steps = 2;
        }
        const RunOutput out = run_cpu(spec, o);
        const StepValues& ref = variant == Variant::kTwoAdamWSteps ? two_steps : one_step;
        EXPECT_NEAR(out.values.loss, ref.loss, 1e-10 * std::abs(ref.loss)) << label;
        const GradientComparison cmp = compare_gradients(out.values.tensors, ref.tensors);
        EXPECT_TRUE(cmp.within(1e-10))
            << label << cmp.mismatch << " worst " << cmp.worst_tensor << " " << cmp.max_rel_error;
        EXPECT_EQ(cmp.tensors, ref.tensors.size()) << label;
        for (const auto& mem : out.record["activation_bytes"])
          EXPECT_EQ(mem["measured_peak_bytes"].get<double>(), mem["model_peak_bytes"].get<double>())
              << label << "rank " << mem["rank"];
        // The whole step's memory: what the rank held, measured, against `ppbench memory`'s
        // model of the same order; the bytes in flight within the model's bound for the
        // mailboxes the order runs with.
        for (const auto& r : out.record["memory"]["ranks"]) {
          for (const char* k : {"params", "grads", "optimizer", "activations"})
            EXPECT_EQ(r["measured"][k].get<double>(), r["model"][k].get<double>())
                << label << "rank " << r["rank"] << " " << k;
          EXPECT_LE(r["measured"]["comm"].get<double>(), r["model"]["comm"].get<double>())
              << label << "rank " << r["rank"];
        }
        ++runs;
        ++runs_by_family[family];
      }
  // Every family ran edited, and the edits were many: a test that edits nothing proves nothing.
  EXPECT_EQ(runs_by_family.size(), all_schedules().size());
  EXPECT_GT(runs, 80);
  EXPECT_GT(edits_made, 8 * runs);
}

TEST(EditedOrders, MlpComputesTheSingleDeviceStep) {
  expect_every_sound_edit_computes_the_step(small_pipeline_mlp(DType::kF64), 2026);
}

TEST(EditedOrders, LlamaComputesTheSingleDeviceStep) {
  expect_every_sound_edit_computes_the_step(small_pipeline_transformer("tiny-llama", DType::kF64),
                                            1128);
}

}  // namespace
}  // namespace ppbench
