// Any sound order computes the step across processes too (run by ctest under mpirun -np 2): each
// family's schedule at D = 2, edited at random as a researcher edits one by hand and still sound
// (tests/common/schedule_edits.h), runs with one rank per process over MPI, and its `--check`
// against the float64 single-device step must pass, plain and over two AdamW steps. Every process
// draws the same edits from the same seed, so all of them run the same order, as they would read
// the same schedule file. tests/backends/test_edited_orders.cpp holds CPU threads to the same.
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/mpi/mpi_run.h"
#include "harness/mpi/mpi_session.h"
#include "schedules/registry.h"
#include "schedules/schedule_file.h"
#include "tests/common/edited_run.h"
#include "tests/common/pipeline_workloads.h"
#include "tests/common/schedule_edits.h"

namespace ppbench {
namespace {

TEST(EditedOrdersAcrossProcesses, EverySoundEditComputesTheSingleDeviceStep) {
  ASSERT_EQ(mpi::World::get().size(), 2) << "run under mpirun -np 2";
  const WorkloadSpec spec = small_pipeline_mlp(DType::kF64);
  std::mt19937 rng(2028);
  int ran = 0;
  for (const ScheduleInfo& info : all_schedules())
    for (const bool adamw : {false, true}) {
      const std::string family(info.name);
      Schedule s;
      try {
        s = generate({family, 2, 4, info.uses_chunks ? 2 : 0, 0});
      } catch (const UsageError&) {
        continue;  // a combination the family refuses, on every process alike
      }
      const int made = edits::random_sound_edits(s, rng, 8);
      const std::string label = family + (adamw ? " adamw" : "") + ", " + std::to_string(made) +
                                " edits:\n" + to_schedule_text(s);
      ASSERT_GT(made, 0) << label << "no edit kept the schedule sound";
      RunOptions o = edits::run_options_for_file(s);
      o.seed = 7;
      o.executor.watchdog_seconds = 30;
      o.check = true;
      if (adamw) {
        o.optimizer.kind = OptimizerOptions::Kind::kAdamW;
        o.steps = 2;
      }
      const RunOutput out = run_cpu_mpi(spec, o, {});
      if (out.report) {
        EXPECT_TRUE(out.record["check"]["passed"].get<bool>()) << label << out.record["check"];
        EXPECT_EQ(out.record["schedule"], "file:edited.txt") << label;
      }
      ++ran;
    }
  EXPECT_EQ(ran, 2 * static_cast<int>(all_schedules().size())) << "every family ran edited";
}

// Two replicas of one rank each, every stage's gradients all-reduced as soon as its last backward
// ends (--dp-overlap): where a rank holds two stages (v = 2, the V shapes), an edited order moves
// which action is a stage's last, and the all-reduce must follow it.
TEST(EditedOrdersAcrossProcesses, OverlappedAllReduceFollowsEachStagesLastBackward) {
  ASSERT_EQ(mpi::World::get().size(), 2) << "run under mpirun -np 2";
  const WorkloadSpec spec = small_pipeline_mlp(DType::kF64);
  std::mt19937 rng(2029);
  int ran = 0, two_stages = 0;
  for (const ScheduleInfo& info : all_schedules()) {
    const std::string family(info.name);
    Schedule s;
    try {
      s = generate({family, 1, 4, info.uses_chunks ? 2 : 0, 0});
    } catch (const UsageError&) {
      continue;
    }
    const int made = edits::random_sound_edits(s, rng, 8);
    const std::string label =
        family + ", " + std::to_string(made) + " edits:\n" + to_schedule_text(s);
    if (made == 0) continue;  // one rank of one stage: an order edits cannot change soundly
    RunOptions o = edits::run_options_for_file(s);
    o.seed = 7;
    o.executor.watchdog_seconds = 30;
    o.check = true;
    o.optimizer.kind = OptimizerOptions::Kind::kAdamW;
    o.steps = 2;
    const RunOutput out = run_cpu_mpi(spec, o, {.replicas = 2, .overlap = true});
    if (out.report) {
      EXPECT_TRUE(out.record["check"]["passed"].get<bool>()) << label << out.record["check"];
    }
    ++ran;
    if (s.placement.stages_per_chain() > 1) ++two_stages;
  }
  EXPECT_GE(two_stages, 5) << "the V shapes and the interleaved families hold two stages";
  EXPECT_GE(ran, two_stages);
}

}  // namespace
}  // namespace ppbench
