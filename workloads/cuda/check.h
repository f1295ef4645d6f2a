// Error checks for the CUDA runtime and cuBLAS(Lt): every failing call becomes a CudaError (a
// DeviceOutOfMemory where memory ran out) whose message carries file:line, the call as written, and
// the library's name and text for the code, so a failure on a remote GPU machine can be traced from
// its log alone.
#pragma once

#include <stdexcept>
#include <string>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

namespace ppbench::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The device's memory ran out (cudaMalloc, a library's workspace, an arena): the machine's
// limit, exit code 3 like any other OutOfMemory, not a CUDA failure.
class DeviceOutOfMemory : public OutOfMemory {
 public:
  using OutOfMemory::OutOfMemory;
};

// "file:line: <expr> failed: <NAME> (<description>)". Pure string work, testable without a GPU.
inline std::string format_error(const char* file, int line, const char* expr, const char* name,
                                const char* description) {
  return std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " + name + " (" +
         description + ")";
}

inline void check_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return;
  const std::string what =
      format_error(file, line, expr, cudaGetErrorName(e), cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) {
    // Not sticky: the context stays usable, so the next launch's check must not find this one
    // as the thread's last error.
    (void)cudaGetLastError();
    throw DeviceOutOfMemory(what);
  }
  throw CudaError(what);
}

inline void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const std::string what =
      format_error(file, line, expr, cublasLtGetStatusName(s), cublasLtGetStatusString(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw DeviceOutOfMemory(what);
  throw CudaError(what);
}

// Precondition failures of the kernels' host side (bad shapes, wrong dtype): not CUDA errors.
inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("ppbench cuda kernel: " + what);
}

}  // namespace ppbench::cuda

#define CUDA_CHECK(call) ::ppbench::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) ::ppbench::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors surface here, asynchronous faults at the
// next synchronising call (run under compute-sanitizer to pin them to a kernel).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
