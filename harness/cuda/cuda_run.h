// `ppbench run --backend cuda`: real training steps of a workload under a schedule on GPUs,
// with the measured and the predicted metrics, in the same record as run_cpu (harness/backends/
// cpu/cpu_run.h) plus the GPU, the placement, the partitions the driver granted and the link.
//
// Placement: `--gpus 0,1,...` (one rank per GPU, NCCL) or `--virtual-devices D` (one GPU split
// into D green-context partitions, device-to-device copies, optional link model); with neither,
// and one rank, GPU 0. A step is F and backward of N micro-batches with gradients accumulated,
// as on the CPU, so loss and gradient norm must equal the CPU's single-device step.
//
// `--cuda-graph` (docs/cuda-graphs.md): the warm-up runs eagerly (at least one step, which the
// record counts as warm-up), then each rank's step is captured once as a CUDA graph and every
// measured step launches the graphs; gradients are zeroed outside the graph before each launch.
// --gpus (and the single-rank default) only: with --virtual-devices it is a UsageError.
// The record's `gpu.cuda_graph` says how the step was captured and where its timings come from.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "harness/backends/run_options.h"
#include "harness/cuda/cuda_executor.h"

namespace ppbench {

struct CudaRunOptions {
  RunOptions run;  // everything `--backend cpu` takes (schedule, partition, steps, seed, ...)
  std::optional<std::string> gpus;                // --gpus 0,1,...
  std::optional<int> virtual_devices;             // --virtual-devices D
  int virtual_device_gpu = 0;                     // the GPU --virtual-devices splits
  int partition_sms = 0;                          // SMs per partition (0: as many as fit)
  std::optional<double> link_bandwidth_gb_per_s;  // --link-bandwidth (virtual devices only)
  std::optional<double> link_latency_us;          // --link-latency (virtual devices only)
  bool cuda_graph = false;                 // --cuda-graph: replay each rank's step as a graph
  std::size_t activation_arena_bytes = 0;  // per rank; 0: a share of the free device memory
  // --check: where the step misses its dtype's default tolerance, how far one rounding of the
  // dtype moves the step (microbatches, steps; `why` when it cannot tell), to allow for as the
  // CPU backend does. The CLI measures it on the CPU (cpu_reference_spread), which this backend
  // does not link; unset, the check is the plain one.
  std::function<std::optional<ReferenceSpread>(const WorkloadSpec&, int, int, std::string*)>
      reference_spread;
};

// Throws UsageError for flags or shapes the run cannot take (named), ExecutionError when a step
// fails (watchdog, CUDA or NCCL error, naming the rank), ppbench::OutOfMemory when the device's
// memory cannot hold the run, ppbench::cuda::CudaError when the device cannot be opened.
RunOutput run_cuda(const WorkloadSpec& spec, const CudaRunOptions& options);

// The host-side checks of run_cuda, without touching a GPU (for the CLI and the tests).
void check_cuda_run_options(const WorkloadSpec& spec, const CudaRunOptions& options);

}  // namespace ppbench
