// What runs the CPU kernels' matrix products, for a record's provenance (Eigen-free, unlike
// gemm.h): "OpenBLAS 0.3.21 DYNAMIC_ARCH ... (core Zen)" or "Eigen 3.4.0".
#pragma once

#include <string>

namespace ppbench::cpu {

std::string gemm_library();

}  // namespace ppbench::cpu
