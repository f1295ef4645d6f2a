// A run whose activations do not fit its device arena ends as the machine's limit (OutOfMemory,
// exit code 3), naming the rank, on one rank and on virtual devices alike, and leaves the GPU
// usable: the same run with room then succeeds in the same process.
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/cuda_run.h"
#include "tests/cuda_exec/gpu_watchdog.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"

namespace ppbench {
namespace {

TEST(OutOfMemory, AFullArenaIsTheMachinesLimitAndTheGpuStaysUsable) {
  std::string why;
  if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  MlpConfig c;
  c.layers = 4, c.width = 256, c.input_dim = 256, c.classes = 8;
  const WorkloadSpec spec = build_mlp(c, 64, DType::kF32);  // 64 KiB per activation
  for (int d : {1, 2}) {
    CudaRunOptions o;
    o.run.schedule = {"1f1b", d, 4, 0, 0};
    o.run.executor.watchdog_seconds = ppbench::gpu_test_watchdog_seconds();
    if (d > 1) o.virtual_devices = d;
    o.activation_arena_bytes = 4096;
    try {
      (void)run_cuda(spec, o);
      ADD_FAILURE() << "D=" << d << ": a 4 KiB arena held the step";
    } catch (const ExecutionError& e) {
      ADD_FAILURE() << "D=" << d << ": a failed step, not the machine's limit: " << e.what();
    } catch (const OutOfMemory& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("rank "), std::string::npos) << m;
      EXPECT_NE(m.find("out of device memory"), std::string::npos) << m;
    }
    o.activation_arena_bytes = std::size_t{64} << 20;
    EXPECT_NO_THROW((void)run_cuda(spec, o)) << "D=" << d;
  }
}

}  // namespace
}  // namespace ppbench
