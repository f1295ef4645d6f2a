#include "workloads/cuda/context.h"

#include "workloads/cuda/check.h"

namespace ppbench::cuda {

Context::Context(DeviceArena& a, cudaStream_t s, std::size_t ws)
    : arena(a), stream(s), workspace_bytes(ws) {
  CUBLAS_CHECK(cublasLtCreate(&lt));
  // The workspace is the library's scratch, not an activation: outside the arena.
  const cudaError_t e = cudaMalloc(&workspace, workspace_bytes);
  if (e != cudaSuccess) {
    cublasLtDestroy(lt);
    CUDA_CHECK(e);
  }
}

Context::~Context() {
  gemm_plans.clear();  // descriptors before the handle they were planned with
  cudaFree(workspace);
  cublasLtDestroy(lt);
}

}  // namespace ppbench::cuda
