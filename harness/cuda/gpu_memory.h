// What a CUDA run adds to the record's "memory" (harness/backends/run_record.h memory_json, the
// one writer of the per-rank measured and modelled bytes): the whole device as the driver sees
// it (cudaMemGetInfo before the ranks were built and after the last step), and each rank's
// activation DeviceArena, whose peak counts everything drawn from it (kept activations, outputs in
// flight, scratch) where the per-rank "activations" counts the kept bytes alone, as on the CPU.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/backends/run_record.h"

namespace ppbench::cuda {

class GpuDevices;

// One GPU of the run: its ordinal, total memory and the bytes in use on it (by every process).
struct DeviceUse {
  int gpu = 0;
  double total = 0, used = 0;
};

// Per distinct GPU of the placement, in rank order of first appearance (needs the devices).
std::vector<DeviceUse> device_use(const GpuDevices& devices);

// One rank's activation arena: its capacity and the most it held in the last step.
struct ArenaUse {
  double capacity = 0, peak = 0;
};

// {"gpus": [{"gpu", "total_bytes", "used_before_bytes", "used_after_bytes", "run_bytes"}],
//  "arenas": [{"rank", "capacity_bytes", "peak_bytes"}], "note"}. `before` and `after` name the
// same GPUs in the same order; std::invalid_argument otherwise.
nlohmann::json device_memory_json(const std::vector<DeviceUse>& before,
                                  const std::vector<DeviceUse>& after,
                                  const std::vector<ArenaUse>& arenas);

}  // namespace ppbench::cuda
