// A GPU step's loss and gradient statistics, computed where the gradients are: each part's
// copies (Chimera, DualPipe) are summed on the device of the first one that holds it, and the sum
// of squares and the sum of every tensor are reduced there in double (workloads/cuda/reduce.h);
// only those scalars cross to the host. With `keep`, the gradients are downloaded instead, in
// the CPU backend's layout (for tests and --check, which compare them tensor by tensor).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/backends/step_values.h"
#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_model.h"

namespace ppbench::cuda {

// The sums of squares and the sums of f32 gradients, reduced in double on the device of the rank
// `home` (its compute context; scratch from its activation arena, which a finished step leaves
// empty): only the two scalars cross to the host.
class DeviceGradientStats {
 public:
  explicit DeviceGradientStats(GpuPipelineRank& home);
  void add(PartGradients& stats, const float* grad, std::int64_t n);

 private:
  cuda::Context& ctx_;
  cuda::DTensor partials_;
};

// Every rank's compute stream must be idle (the step synchronised).
void summarize_gradients(const WorkloadSpec& spec, const GpuDevices& devices,
                         const std::vector<std::unique_ptr<GpuPipelineRank>>& ranks, int parts,
                         bool keep, StepValues& out);

// The step's mean loss over its micro-batches.
double mean_loss(const GpuDevices& devices,
                 const std::vector<std::unique_ptr<GpuPipelineRank>>& ranks);

}  // namespace ppbench::cuda
