// Errors the user can fix (bad flags, bad schedule parameters, bad costs): the CLI turns them
// into a one-line message and exit code 2. Problems of the machine or its environment (no GPU
// visible, a library that cannot be loaded, too little memory): exit code 3. Anything else
// escaping main is a bug (exit code 1).
#pragma once

#include <stdexcept>
#include <string>

namespace ppbench {

class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class EnvironmentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A measurement that ran but failed its own check (`run --check` past its tolerance): the record
// is written, then exit code 1 with one line.
class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A schedule that breaks a dependency, the placement, or deadlocks. Carries the
// rank and action that break it in the message.
class InvalidSchedule : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ppbench
