#include <cstdio>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "workloads/cuda/device_info.h"

namespace ppbench::cuda {

namespace {
std::string version_text(int v) {  // 12040 -> "12.4"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
}  // namespace

bool has_gpu(std::string* reason) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (reason) *reason = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    return false;
  }
  if (n == 0) {
    if (reason) *reason = "the CUDA runtime reports 0 devices";
    return false;
  }
  return true;
}

std::string device_info_text() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string versions = "CUDA runtime " + version_text(runtime) + ", driver " +
                         (driver ? version_text(driver) : std::string("none")) + ", cuBLASLt " +
                         cublas_version_text();
  std::string why;
  if (!has_gpu(&why)) return "no GPU visible (" + why + "); " + versions;
  int n = 0;
  cudaGetDeviceCount(&n);
  std::string out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    char line[256];
    std::snprintf(line, sizeof line, "GPU %d: %s, %d SMs, %.1f GiB, compute capability %d.%d\n", i,
                  p.name, p.multiProcessorCount,
                  static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), p.major,
                  p.minor);
    out += line;
  }
  return out + versions;
}

std::string cublas_version_text() {
  const std::size_t v = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace ppbench::cuda
