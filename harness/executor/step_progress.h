// The watchdog's view of a step (harness/executor/executor_core.h, Watchdog): whether its ranks
// are getting on. Kept apart so that the mailboxes that consult it need nothing else.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>

namespace ppbench {

// Whether the ranks of one process are getting on, for the watchdog: a rank works from its
// start to its end except while it waits on the transport. A wait past its deadline goes on
// while some rank works or has worked within the patience, so that a rank waiting on a healthy
// but slow peer (an action longer than the patience) is never reported; only a step in which
// every rank has waited for the whole patience is (a deadlock, a lost message). A rank stuck in
// its own work (a pass that never returns) is not the watchdog's to catch. Across processes a
// process sees only its own rank, and a wait there is limited by the patience alone.
class StepProgress {
 public:
  using Clock = std::chrono::steady_clock;

  // `ranks` ranks, all counted as working until they say otherwise (a thread not started yet is
  // not stuck).
  StepProgress(int ranks, Clock::duration patience, Clock::time_point now = Clock::now())
      : working_(ranks), last_work_(now.time_since_epoch().count()), patience_(patience) {}

  // A rank stops working: it begins a wait on the transport, or it has finished its walk.
  void stops(Clock::time_point now = Clock::now()) noexcept {
    // Before the count drops, so that whoever sees no rank working also sees when the last
    // stopped. Only ever forward: a rank preempted between reading the clock and this store
    // would otherwise move the time back over a later rank's, and make the step look idle
    // for longer than it was.
    const Clock::rep t = now.time_since_epoch().count();
    Clock::rep seen = last_work_.load(std::memory_order_relaxed);
    while (seen < t && !last_work_.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
    }
    working_.fetch_sub(1, std::memory_order_acq_rel);
  }
  // A rank's wait has ended.
  void resumes() noexcept { working_.fetch_add(1, std::memory_order_acq_rel); }

  // A wait's `deadline` has passed at `now`: the deadline it has now. Later than `now` while
  // some rank works (by a patience from now) or stopped working less than a patience ago; else
  // `deadline`, and the wait gives up.
  Clock::time_point extended(Clock::time_point deadline, Clock::time_point now) const noexcept {
    if (working_.load(std::memory_order_acquire) > 0) return std::max(deadline, now + patience_);
    const Clock::time_point last{Clock::duration(last_work_.load(std::memory_order_relaxed))};
    return std::max(deadline, last + patience_);
  }

 private:
  std::atomic<int> working_;
  std::atomic<Clock::rep> last_work_;  // when a rank last stopped working
  Clock::duration patience_;
};

}  // namespace ppbench
