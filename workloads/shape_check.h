// Shape checks shared by the workload builders: every bad size is a UsageError whose one-line
// message names the flag, the value and what is allowed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "schedules/error.h"

namespace ppbench {

inline void require_positive(const char* flag, int64_t value) {
  if (value <= 0)
    throw UsageError(std::string(flag) + " " + std::to_string(value) +
                     " is not allowed: it must be a positive integer");
}

// Number of elements of a tensor of this shape.
inline int64_t elements(std::initializer_list<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace ppbench
