// What every GPU layer pass runs with: the rank's stream, its activation arena, a cuBLASLt handle
// and workspace, and a cache of chosen GEMM algorithms (the heuristic query costs tens of
// microseconds; a step repeats the same shapes many times).
#pragma once

#include <string>
#include <unordered_map>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "workloads/cuda/arena.h"

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
  std::unordered_map<std::string, cublasLtMatmulAlgo_t> algos;
  // The SMs this rank's kernels may use (a virtual device's partition); cuBLASLt's heuristics
  // otherwise plan for the whole GPU (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET). 0: the device's.
  // Set before the first GEMM: the chosen algorithms are cached.
  int sm_count_target = 0;
};

}  // namespace ppbench::cuda
