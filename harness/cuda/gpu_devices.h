// The devices the ranks of a GPU run execute on, opened from a GpuPlacement: for `--gpus`, one
// GPU per rank (its primary context); for `--virtual-devices D`, one GPU split into D green
// contexts by ONE cuDevSmResourceSplitByCount call (without --sms-per-device, k steps down until
// the driver cuts D groups), with the partitions the driver granted compared against
// sm_partition's plan. Each rank gets a compute and a communication stream
// (named for Nsight Systems) created in its context, so kernels on them run on its SMs only.
//
// The driver API is reached through harness/cuda/driver_api.h (the runtime's entry points, no
// libcuda link), so that every binary still loads (and its tests skip) on a machine with no driver.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "harness/cuda/gpu_placement.h"
#include "harness/cuda/sm_partition.h"

namespace ppbench::cuda {

struct RankDevice {
  int rank = 0;
  int device = 0;               // CUDA ordinal
  CUcontext context = nullptr;  // the green context as a CUcontext; nullptr: the primary one
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
  int sms = 0;  // SMs its kernels may use

  // Makes this rank's context current on the calling thread: every CUDA call after it (arena
  // allocations, cuBLASLt handles, launches) belongs to the rank's device or partition.
  void make_current() const;
};

class GpuDevices {
 public:
  // `partition_sms` > 0 asks for partitions of exactly that many SMs (D partitions of k SMs
  // against one of k); 0 takes as many as fit. Throws UsageError for impossible requests and
  // EnvironmentError for driver and runtime failures (naming the call): the machine's problem.
  static std::unique_ptr<GpuDevices> open(const GpuPlacement& placement, int partition_sms = 0);
  ~GpuDevices();
  GpuDevices(const GpuDevices&) = delete;
  GpuDevices& operator=(const GpuDevices&) = delete;

  int ranks() const { return static_cast<int>(ranks_.size()); }
  // Makes the first GPU's primary context current on the calling thread again. A green context
  // may be current on one thread at a time (the driver does not synchronise it), so a thread
  // that made a rank's context current for set-up or read-out hands it back before the rank's
  // own thread uses it.
  void release_current() const;
  const RankDevice& rank(int r) const { return ranks_.at(static_cast<std::size_t>(r)); }
  const GpuPlacement& placement() const { return placement_; }

  std::vector<std::string> gpu_names;  // per rank, the device's name
  bool virtual_devices = false;
  SmPartitionPlan partition_plan;  // virtual devices only
  SmGrantReport grant;             // virtual devices only: what the driver gave
  SmGranularity granularity;       // as the driver reported it

 private:
  GpuDevices() = default;
  GpuPlacement placement_;
  std::vector<RankDevice> ranks_;
  std::vector<CUgreenCtx> green_;
};

// Throws ppbench::cuda::CudaError "<call> failed: <name>" when a driver call fails.
void check_driver(CUresult r, const char* call);

}  // namespace ppbench::cuda
