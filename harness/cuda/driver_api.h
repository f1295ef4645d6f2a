// The CUDA driver entry points the GPU backend calls (green contexts, context switches), reached
// through the runtime's cudaGetDriverEntryPointByVersion rather than by linking libcuda, so that
// every binary still loads (and its tests skip) on a machine with no driver.
//
// Each entry point is asked for at the ABI version that its typedef in cudaTypedefs.h names
// (PFN_<symbol>_v<version>): the driver returns the newest variant not newer than the version
// asked for, so asking for an older one than the symbol's first release returns nothing
// (cuGreenCtxStreamCreate exists from 12.5, the rest of the green-context API from 12.4). The
// one list below declares both the member's type and the version, so the two cannot disagree.
#pragma once

#include <cudaTypedefs.h>

#include <string>
#include <vector>

#include <cuda.h>

namespace ppbench::cuda {

// X(symbol, version): the symbol as cuda.h declares it, and the version of its
// PFN_<symbol>_v<version> typedef.
#define PPBENCH_DRIVER_ENTRY_POINTS(X)  \
  X(cuDeviceGetDevResource, 12040)      \
  X(cuDevSmResourceSplitByCount, 12040) \
  X(cuDevResourceGenerateDesc, 12040)   \
  X(cuGreenCtxCreate, 12040)            \
  X(cuGreenCtxDestroy, 12040)           \
  X(cuCtxFromGreenCtx, 12040)           \
  X(cuGreenCtxStreamCreate, 12050)      \
  X(cuCtxSetCurrent, 4000)              \
  X(cuGetErrorName, 6000)

struct DriverApi {
#define PPBENCH_DRIVER_MEMBER(symbol, version) PFN_##symbol##_v##version symbol = nullptr;
  PPBENCH_DRIVER_ENTRY_POINTS(PPBENCH_DRIVER_MEMBER)
#undef PPBENCH_DRIVER_MEMBER
};

struct DriverEntryPoint {
  std::string symbol;
  int version = 0;  // CUDA ABI version, 1000 * major + 10 * minor
};

// The list above as data, for the tests and for error messages.
const std::vector<DriverEntryPoint>& driver_entry_points();

// Every entry point, resolved once. Throws ppbench::cuda::CudaError naming the symbol and the
// driver version it needs when the driver lacks one.
const DriverApi& driver_api();

// The problem with asking for `entry` given the text of cudaTypedefs.h, or "" when there is
// none: a typedef PFN_<symbol>_v<version> must be declared there. Host-only (the unit test).
std::string check_entry_point(const DriverEntryPoint& entry, const std::string& typedefs_h);

}  // namespace ppbench::cuda
