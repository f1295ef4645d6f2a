// Any sound order computes the step on virtual devices too: each family's schedule at D = 4,
// edited at random as a researcher edits one by hand and still sound
// (tests/common/schedule_edits.h), runs on a GPU split into four partitions and must equal the
// CPU backend's float64 single-device step, every parameter gradient within fp32's tolerance
// (tests/cuda_exec/run_matches_cpu.h). The GPU executor plans its copies from the order (each
// receive waits on the event its sender recorded); an order no generator writes is where a plan
// that assumed regular orders would take the wrong tensor. tests/backends/test_edited_orders.cpp
// holds the CPU threads to the same. Skips with a message without a GPU.
#include <optional>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/cuda_run.h"
#include "schedules/registry.h"
#include "schedules/schedule_file.h"
#include "tests/common/edited_run.h"
#include "tests/common/schedule_edits.h"
#include "tests/cuda_exec/gpu_watchdog.h"
#include "tests/cuda_exec/run_matches_cpu.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"

namespace ppbench {
namespace {

TEST(EditedOrdersOnVirtualDevices, EverySoundEditComputesTheSingleDeviceStep) {
  std::string why;
  if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  MlpConfig c;
  c.layers = 8, c.width = 32, c.input_dim = 16, c.classes = 5;
  const WorkloadSpec spec = build_mlp(c, 4, DType::kF32);
  constexpr int kDevices = 4, kMicrobatches = 8;
  std::mt19937 rng(2027);
  int ran = 0;
  for (const ScheduleInfo& info : all_schedules()) {
    const std::string family(info.name);
    Schedule s;
    try {
      s = generate({family, kDevices, kMicrobatches, info.uses_chunks ? 2 : 0, 0});
    } catch (const UsageError&) {
      continue;  // a combination the family refuses
    }
    const int made = edits::random_sound_edits(s, rng, 12);
    const std::string label =
        family + ", " + std::to_string(made) + " edits:\n" + to_schedule_text(s);
    if (made == 0) {
      ADD_FAILURE() << label << "no edit kept the schedule sound";
      continue;
    }
    CudaRunOptions o;
    o.run = edits::run_options_for_file(s);
    o.run.seed = 77;
    o.run.executor.watchdog_seconds = gpu_test_watchdog_seconds();
    o.virtual_devices = kDevices;
    o.activation_arena_bytes = std::size_t{256} << 20;
    const std::optional<RunOutput> out = run_and_compare_with_cpu(spec, o, 1e-4, label);
    if (out) ++ran;
  }
  EXPECT_EQ(ran, static_cast<int>(all_schedules().size())) << "every family ran edited";
}

}  // namespace
}  // namespace ppbench
