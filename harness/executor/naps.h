// How a waiter naps between looks once its spin is spent (the mailboxes of rank threads,
// mailbox.h; MPI's probes, harness/mpi/mpi_transport.h): 20 us first, then twice the last, up to
// a cap. Short naps where the waiter has a core of its own, since a late wake-up shows as idle
// time (with the 1 us timer slack of core/timer_slack.h a 50 us nap lasted about 75 us on the
// development VM); longer ones where waiters share cores and every look takes a core from a
// rank with work.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace ppbench {

class Naps {
 public:
  static constexpr std::chrono::microseconds kOwnCore{50};
  static constexpr std::chrono::microseconds kSharedCores{200};

  explicit Naps(std::chrono::microseconds longest) : longest_(longest) {}

  // Sleeps the next nap.
  void take() {
    std::this_thread::sleep_for(next_);
    next_ = std::min(next_ * 2, longest_);
  }

 private:
  std::chrono::microseconds next_{20};
  std::chrono::microseconds longest_;
};

// A poller's pause between looks: none while its spin lasts, then Naps, short ones after a spin
// (the poller has a core of its own) and longer ones without (it shares cores).
class SpinThenNap {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SpinThenNap(std::chrono::microseconds spin)
      : spin_until_(Clock::now() + spin),
        naps_(spin.count() > 0 ? Naps::kOwnCore : Naps::kSharedCores) {}

  // After a look that found nothing, at `now`.
  void pause(Clock::time_point now) {
    if (now >= spin_until_) naps_.take();
  }

 private:
  Clock::time_point spin_until_;
  Naps naps_;
};

}  // namespace ppbench
