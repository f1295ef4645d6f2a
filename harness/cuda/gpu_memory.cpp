#include "harness/cuda/gpu_memory.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>

#include "harness/cuda/gpu_devices.h"
#include "workloads/cuda/check.h"

namespace ppbench::cuda {

std::vector<DeviceUse> device_use(const GpuDevices& devices) {
  std::vector<DeviceUse> out;
  for (int r = 0; r < devices.ranks(); ++r) {
    const RankDevice& d = devices.rank(r);
    if (std::any_of(out.begin(), out.end(), [&](const DeviceUse& u) { return u.gpu == d.device; }))
      continue;
    d.make_current();
    std::size_t free = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free, &total));
    out.push_back({d.device, static_cast<double>(total), static_cast<double>(total - free)});
  }
  devices.release_current();
  return out;
}

nlohmann::json device_memory_json(const std::vector<DeviceUse>& before,
                                  const std::vector<DeviceUse>& after,
                                  const std::vector<ArenaUse>& arenas) {
  if (before.size() != after.size())
    throw std::invalid_argument("device memory: " + std::to_string(before.size()) +
                                " GPUs before the run but " + std::to_string(after.size()) +
                                " after");
  nlohmann::json gpus = nlohmann::json::array();
  for (std::size_t k = 0; k < before.size(); ++k) {
    if (before[k].gpu != after[k].gpu)
      throw std::invalid_argument("device memory: GPU " + std::to_string(before[k].gpu) +
                                  " before the run, GPU " + std::to_string(after[k].gpu) +
                                  " after");
    gpus.push_back({{"gpu", before[k].gpu},
                    {"total_bytes", before[k].total},
                    {"used_before_bytes", before[k].used},
                    {"used_after_bytes", after[k].used},
                    {"run_bytes", after[k].used - before[k].used}});
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t r = 0; r < arenas.size(); ++r)
    ranks.push_back(
        {{"rank", r}, {"capacity_bytes", arenas[r].capacity}, {"peak_bytes", arenas[r].peak}});
  return {{"gpus", gpus},
          {"arenas", ranks},
          {"note",
           "gpus: cudaMemGetInfo's used bytes (every process on the GPU) before the ranks were "
           "built and after the last step, with the run's arenas, states and cuBLASLt "
           "workspaces still held; arenas: each rank's activation arena, whose peak counts "
           "kept activations, outputs in flight and scratch, where the ranks' measured "
           "activations count the kept bytes alone; measured comm is 0 on the CUDA backend "
           "(its transports do not count bytes in flight)"}};
}

}  // namespace ppbench::cuda
