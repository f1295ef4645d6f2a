// What every GPU layer pass runs with: the rank's stream, its activation arena, a cuBLASLt handle
// and workspace, and the GEMM plans of the shapes it has run (gemm_plans.h).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "workloads/cuda/arena.h"
#include "workloads/cuda/gemm_plans.h"

namespace ppbench::cuda {

class Context {
 public:
  // `arena` holds this rank's activations; `stream` may be nullptr (the legacy default stream).
  explicit Context(DeviceArena& arena, cudaStream_t stream = nullptr,
                   std::size_t workspace_bytes = std::size_t{32} << 20);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  DeviceArena& arena;
  cudaStream_t stream;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes;
  GemmPlans gemm_plans;
  // The SMs this rank's kernels may use (a virtual device's partition); cuBLASLt's heuristics
  // otherwise plan for the whole GPU (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET). 0: the device's.
  // Part of each GEMM plan's key, so a change takes effect at the next GEMM.
  int sm_count_target = 0;
};

}  // namespace ppbench::cuda
