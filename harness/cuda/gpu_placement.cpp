#include "harness/cuda/gpu_placement.h"

#include <charconv>

#include "core/error.h"

namespace ppbench {

namespace {

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

void check_visible(int gpu, int visible, const std::string& flag) {
  if (visible >= 0 && gpu >= visible)
    throw UsageError(flag + ": GPU " + std::to_string(gpu) + " is not visible (this node shows " +
                     std::to_string(visible) + " GPU" + (visible == 1 ? "" : "s") +
                     (visible > 0 ? ", 0.." + std::to_string(visible - 1) : std::string()) + ")");
}

}  // namespace

std::vector<int> parse_gpu_list(std::string_view text) {
  if (text.empty()) throw UsageError("--gpus: expected a comma-separated list of GPU ids, got ''");
  std::vector<int> gpus;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view token = text.substr(begin, comma - begin);
    int gpu = -1;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), gpu);
    if (token.empty() || ec != std::errc() || end != token.data() + token.size())
      throw UsageError("--gpus: '" + std::string(token) + "' in '" + std::string(text) +
                       "' is not a GPU id (expected e.g. --gpus 0,1,2,3)");
    if (gpu < 0) throw UsageError("--gpus: GPU id " + std::to_string(gpu) + " is negative");
    for (int seen : gpus)
      if (seen == gpu)
        throw UsageError("--gpus: GPU " + std::to_string(gpu) + " is listed twice in '" +
                         std::string(text) +
                         "'; NCCL does not allow two ranks on one GPU "
                         "(use --virtual-devices D to split one GPU into D partitions)");
    gpus.push_back(gpu);
    begin = comma + 1;
  }
  return gpus;
}

GpuPlacement plan_gpu_placement(const GpuPlacementFlags& f) {
  if (f.devices < 1)
    throw UsageError("--devices must be at least 1, got " + std::to_string(f.devices));
  if (f.gpus && f.virtual_devices)
    throw UsageError(
        "--gpus and --virtual-devices exclude each other (NCCL across GPUs, or one "
        "GPU split into partitions)");
  GpuPlacement p;
  if (f.gpus) {
    p.kind = GpuPlacement::Kind::Gpus;
    p.gpus = parse_gpu_list(*f.gpus);
    if (static_cast<int>(p.gpus.size()) != f.devices)
      throw UsageError("--gpus " + *f.gpus + " lists " + std::to_string(p.gpus.size()) +
                       " GPUs but --devices is " + std::to_string(f.devices) +
                       " (one rank per GPU)");
    for (int g : p.gpus) check_visible(g, f.visible_gpus, "--gpus");
    return p;
  }
  if (f.virtual_devices) {
    const int d = *f.virtual_devices;
    if (d < 1) throw UsageError("--virtual-devices must be at least 1, got " + std::to_string(d));
    if (d != f.devices)
      throw UsageError("--virtual-devices " + std::to_string(d) + " differs from --devices " +
                       std::to_string(f.devices) + " (one rank per partition)");
    if (f.virtual_device_gpu < 0)
      throw UsageError("GPU id " + std::to_string(f.virtual_device_gpu) + " is negative");
    check_visible(f.virtual_device_gpu, f.visible_gpus, "--virtual-devices");
    p.kind = GpuPlacement::Kind::VirtualDevices;
    p.gpus = {f.virtual_device_gpu};
    p.virtual_devices = d;
    return p;
  }
  if (f.devices != 1)
    throw UsageError("--backend cuda with --devices " + std::to_string(f.devices) +
                     " needs --gpus (e.g. --gpus 0,1,...) or --virtual-devices " +
                     std::to_string(f.devices));
  check_visible(0, f.visible_gpus, "--backend cuda");
  p.gpus = {0};
  return p;
}

std::string describe(const GpuPlacement& p) {
  if (p.kind == GpuPlacement::Kind::VirtualDevices)
    return "GPU " + std::to_string(p.gpus.at(0)) + " split into " +
           std::to_string(p.virtual_devices) + " virtual devices (green contexts)";
  return (p.gpus.size() == 1 ? "GPU " : "GPUs ") + join(p.gpus) +
         (p.gpus.size() > 1 ? " (NCCL)" : "");
}

}  // namespace ppbench
