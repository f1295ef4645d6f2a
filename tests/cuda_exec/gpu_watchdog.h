// The watchdog limit of the GPU tests' runs: 30 s, times PPBENCH_TEST_TIME_SCALE where it is set
// (a whole number from 1 to 1000). Under compute-sanitizer a step runs tens of times slower, and a
// watchdog that fires there reports a hang that is not one; scripts/gpu-check.sh sets the scale
// for its sanitizer parts.
#pragma once

#include <cstdlib>
#include <string>

namespace ppbench {

inline double gpu_test_watchdog_seconds() {
  const char* scale = std::getenv("PPBENCH_TEST_TIME_SCALE");
  if (scale == nullptr || *scale == '\0') return 30;
  char* end = nullptr;
  const long k = std::strtol(scale, &end, 10);
  // A value that is not a whole number in range is ignored: the tests keep their 30 s.
  return *end == '\0' && k >= 1 && k <= 1000 ? 30.0 * static_cast<double>(k) : 30;
}

}  // namespace ppbench
