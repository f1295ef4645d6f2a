// Errors the user can fix (bad flags, bad schedule parameters, bad costs).
// The CLI turns them into a one-line message and exit code 2; anything else
// escaping main is a bug.
#pragma once

#include <stdexcept>
#include <string>

namespace ppbench {

class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A schedule that breaks a dependency, the placement, or deadlocks. Carries the
// rank and action that break it in the message.
class InvalidSchedule : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ppbench
