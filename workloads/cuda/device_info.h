// What GPU this process sees, for `ppbench --version`, provenance and test skips. Works (and says
// why not) on machines without a driver or a GPU.
#pragma once

#include <string>

namespace ppbench::cuda {

// True when at least one CUDA device is usable; otherwise `reason` (if given) says why, e.g.
// "cudaErrorNoDevice (no CUDA-capable device is detected)".
bool has_gpu(std::string* reason = nullptr);

// One line per visible device: name, SM count, memory, compute capability, plus the driver and
// runtime versions; or "no GPU visible (<reason>)".
std::string device_info_text();

// cuBLASLt's version as "major.minor.patch" (provenance).
std::string cublas_version_text();

}  // namespace ppbench::cuda
