// Making a transport (gpu_transport.h) without including its interface, which pulls in
// NCCL's plan types that run_cuda does not need;
// shared_ptr, because its deleter is fixed where the type is complete.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/cuda/link_model.h"

namespace ppbench::cuda {

class GpuTransport;

// Device-to-device copies between the green-context partitions of one GPU.
std::shared_ptr<GpuTransport> make_copy_transport(int ranks, std::optional<LinkModel> link);

// NCCL point-to-point over one communicator (ncclCommInitAll over `devices`, rank = index); loads
// NCCL (nccl_api.h). Throws UsageError when a device is listed twice (NCCL cannot put two ranks
// on one GPU) and EnvironmentError when NCCL is not in this build or cannot be loaded.
std::shared_ptr<GpuTransport> make_nccl_transport(const std::vector<int>& devices);

// The transport's name for records ("NCCL point-to-point", "device-to-device copies").
std::string transport_name(const GpuTransport& t);

}  // namespace ppbench::cuda
