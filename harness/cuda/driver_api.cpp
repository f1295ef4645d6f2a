#include "harness/cuda/driver_api.h"

#include <mutex>
#include <regex>

#include "workloads/cuda/check.h"

namespace ppbench::cuda {

namespace {

std::string version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

template <class Fn>
void resolve(const char* symbol, int version, Fn& fn) {
  cudaDriverEntryPointQueryResult status{};
  void* p = nullptr;
  CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &p, static_cast<unsigned int>(version),
                                              cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || p == nullptr)
    throw cuda::CudaError(std::string("the CUDA driver has no ") + symbol + " at ABI " +
                          version_text(version) + " (it needs a driver for CUDA " +
                          version_text(version) + " or newer)");
  fn = reinterpret_cast<Fn>(p);
}

}  // namespace

const std::vector<DriverEntryPoint>& driver_entry_points() {
  static const std::vector<DriverEntryPoint> list = {
#define PPBENCH_DRIVER_ENTRY(symbol, version) {#symbol, version},
      PPBENCH_DRIVER_ENTRY_POINTS(PPBENCH_DRIVER_ENTRY)
#undef PPBENCH_DRIVER_ENTRY
  };
  return list;
}

const DriverApi& driver_api() {
  static DriverApi api;
  static std::once_flag once;
  std::call_once(once, [] {
#define PPBENCH_DRIVER_RESOLVE(symbol, version) resolve(#symbol, version, api.symbol);
    PPBENCH_DRIVER_ENTRY_POINTS(PPBENCH_DRIVER_RESOLVE)
#undef PPBENCH_DRIVER_RESOLVE
  });
  return api;
}

std::string check_entry_point(const DriverEntryPoint& e, const std::string& typedefs_h) {
  const std::string name = "PFN_" + e.symbol + "_v" + std::to_string(e.version);
  const std::regex declared("\\*\\s*" + name + "\\s*\\)");
  if (std::regex_search(typedefs_h, declared)) return "";
  std::string known;
  const std::regex any("\\*\\s*PFN_" + e.symbol + "_v([0-9]+)\\s*\\)");
  for (auto it = std::sregex_iterator(typedefs_h.begin(), typedefs_h.end(), any);
       it != std::sregex_iterator(); ++it)
    known += (known.empty() ? "" : ", ") + (*it)[1].str();
  return e.symbol + " asked for at " + std::to_string(e.version) + ", but cudaTypedefs.h has no " +
         name +
         (known.empty() ? " (and no typedef of it at all)" : " (its typedefs: " + known + ")");
}

}  // namespace ppbench::cuda
