// One GPU never needs NCCL: the binaries do not link libnccl (it is loaded at run time, only for
// --gpus with more than one GPU, harness/cuda/nccl_api.h), a single-rank run and virtual devices
// use device-to-device copies, and such a run leaves NCCL unloaded.
#include <link.h>

#include <string>

#include <gtest/gtest.h>

#include "harness/cuda/cuda_run.h"
#include "harness/cuda/nccl_api.h"
#include "tests/cuda_exec/gpu_watchdog.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"

namespace ppbench {
namespace {

bool nccl_mapped() {
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        if (info->dlpi_name && std::string(info->dlpi_name).find("libnccl") != std::string::npos)
          *static_cast<bool*>(data) = true;
        return 0;
      },
      &found);
  return found;
}

// Read before main: only libraries the binary links (or that they link) are mapped by then.
const bool kNcclMappedAtStart = nccl_mapped();

TEST(NcclLoading, TheBinaryDoesNotLinkNccl) {
  EXPECT_FALSE(kNcclMappedAtStart) << "libnccl was mapped before main: something links it";
}

TEST(NcclLoading, OnlySeveralGpusUseNccl) {
  GpuPlacementFlags f;
  f.devices = 1;
  f.visible_gpus = 1;
  EXPECT_FALSE(plan_gpu_placement(f).uses_nccl());  // the single-rank default
  f.gpus = "0";
  EXPECT_FALSE(plan_gpu_placement(f).uses_nccl());
  f.gpus.reset();
  f.virtual_devices = 4;
  f.devices = 4;
  EXPECT_FALSE(plan_gpu_placement(f).uses_nccl());
  f.virtual_devices.reset();
  f.gpus = "0,1";
  f.devices = 2;
  f.visible_gpus = 2;
  EXPECT_TRUE(plan_gpu_placement(f).uses_nccl());
}

TEST(NcclLoading, OneGpuRunsLeaveNcclUnloaded) {
  std::string why;
  if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  const bool before = cuda::nccl_loaded();
  MlpConfig c;
  c.layers = 4, c.width = 32, c.input_dim = 16, c.classes = 5;
  const WorkloadSpec spec = build_mlp(c, 4, DType::kF32);
  for (int d : {1, 2}) {
    CudaRunOptions o;
    o.run.schedule = {"1f1b", d, 4, 0, 0};
    o.run.executor.watchdog_seconds = ppbench::gpu_test_watchdog_seconds();
    if (d > 1) o.virtual_devices = d;
    o.activation_arena_bytes = std::size_t{64} << 20;
    const RunOutput out = run_cuda(spec, o);
    EXPECT_EQ(out.record["gpu"]["transport"], "device-to-device copies") << "D=" << d;
    if (!before) {
      EXPECT_FALSE(cuda::nccl_loaded()) << "D=" << d;
      EXPECT_EQ(out.record["gpu"]["nccl_version"], "not loaded") << "D=" << d;
    }
  }
}

}  // namespace
}  // namespace ppbench
