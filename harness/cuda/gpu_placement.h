// Where the ranks of a GPU run go: `--gpus 0,1,...` puts one rank on each listed GPU of this node
// (transport: NCCL point-to-point); `--virtual-devices D` splits one GPU into D green-context
// partitions (transport: device-to-device copies). Planned on the host before any CUDA call, so
// a bad flag is a one-line UsageError rather than a driver error halfway through start-up.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppbench {

struct GpuPlacement {
  enum class Kind { Gpus, VirtualDevices };
  Kind kind = Kind::Gpus;
  std::vector<int> gpus;    // rank -> CUDA device ordinal; one entry (the split GPU) for virtual
  int virtual_devices = 0;  // D partitions of gpus[0]; 0 for Kind::Gpus

  int ranks() const { return kind == Kind::Gpus ? static_cast<int>(gpus.size()) : virtual_devices; }
  // The device ordinal rank r runs on.
  int device_of(int rank) const { return kind == Kind::Gpus ? gpus.at(rank) : gpus.at(0); }
  // Only ranks on two or more GPUs talk through NCCL; one GPU (one rank, or virtual devices)
  // copies device to device and never loads it.
  bool uses_nccl() const { return kind == Kind::Gpus && gpus.size() > 1; }
};

// Parses "0,1,3". Throws UsageError naming the bad token, a negative ordinal, or a GPU listed
// twice (NCCL cannot run two ranks on one GPU; --virtual-devices is the way to do that).
std::vector<int> parse_gpu_list(std::string_view text);

struct GpuPlacementFlags {
  std::optional<std::string> gpus;     // --gpus, as typed
  std::optional<int> virtual_devices;  // --virtual-devices
  int virtual_device_gpu = 0;          // which GPU --virtual-devices splits
  int devices = 0;                     // --devices: pipeline ranks of the schedule
  int visible_gpus = -1;               // CUDA devices this node shows (-1: not known yet)
};

// Checks the flags against each other and against the schedule's rank count. With neither flag
// and --devices 1, the step runs on GPU 0 as a single rank. Throws UsageError (one line).
GpuPlacement plan_gpu_placement(const GpuPlacementFlags& flags);

// "GPUs 0,1,2,3 (NCCL)" or "GPU 0 split into 4 virtual devices (green contexts)", for records.
std::string describe(const GpuPlacement& p);

}  // namespace ppbench
