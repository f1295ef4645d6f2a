// The in-process transport: one bounded mailbox per (src, dst) pair of ranks,
// messages named by the task whose output they carry.
//
// Receives match by name, as MPI matches tags, so the order of sends between
// two ranks need not equal the order of receives; a send blocks while its
// mailbox already holds `capacity` messages, which is what the validator's
// check_deadlock_free(capacity) models. Every wait gives up at a deadline so
// that a stuck rank becomes an error, never a hang.
//
// Waking a thread that sleeps on a condition variable costs its waker a futex
// call: 10-15 us on a VM, paid by the sender, which in a pipeline is usually
// the busy rank (DualPipeV's ranks lost about 30 us per overlapped pair so).
// So when every rank has a core of its own, a waiter spins for a short while
// on the mailbox's version counter, then naps and looks again: no sender ever
// wakes anyone. Ranks that share cores sleep until woken, as the wake-up hands
// them the core.
//
// With the step's StepProgress (step_progress.h), a wait past its deadline goes on while some
// rank of the step works or worked within the watchdog's patience: it gives up only where every
// rank has been waiting that long.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "harness/executor/naps.h"
#include "harness/executor/step_progress.h"
#include "harness/executor/transport.h"

namespace ppbench {

template <class Payload>
class Mailbox {
 public:
  using Clock = std::chrono::steady_clock;

  // `spin`: how long a waiter polls before it naps between looks (zero: it sleeps on the
  // condition variable until a sender or receiver wakes it). `progress`: the step's, which may
  // put a passed deadline off (none: a deadline is final).
  explicit Mailbox(int capacity, std::chrono::microseconds spin = std::chrono::microseconds(0),
                   const StepProgress* progress = nullptr)
      : capacity_(capacity), spin_(spin), progress_(progress) {}

  WaitResult send(std::uint64_t name, Payload payload, Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (!wait_until(lock, deadline, [&] {
          return aborted_ || capacity_ <= 0 || static_cast<int>(queue_.size()) < capacity_;
        }))
      return WaitResult::kTimedOut;
    if (aborted_) return WaitResult::kAborted;
    queue_.emplace_back(name, std::move(payload));
    version_.fetch_add(1, std::memory_order_release);
    changed_.notify_all();
    return WaitResult::kDone;
  }

  bool has_room() {
    std::lock_guard lock(mutex_);
    return capacity_ <= 0 || static_cast<int>(queue_.size()) < capacity_;
  }

  // `on_take(message)` runs under the mailbox's lock as the message leaves it.
  template <class OnTake = void (*)(const Payload&)>
  WaitResult receive(
      std::uint64_t name, Payload& out, Clock::time_point deadline,
      OnTake on_take = [](const Payload&) {}) {
    std::unique_lock lock(mutex_);
    typename std::deque<std::pair<std::uint64_t, Payload>>::iterator it;
    auto arrived = [&] {
      if (aborted_) return true;
      for (it = queue_.begin(); it != queue_.end(); ++it)
        if (it->first == name) return true;
      return false;
    };
    if (!wait_until(lock, deadline, arrived)) return WaitResult::kTimedOut;
    if (aborted_) return WaitResult::kAborted;
    on_take(it->second);
    out = std::move(it->second);
    queue_.erase(it);
    version_.fetch_add(1, std::memory_order_release);
    changed_.notify_all();
    return WaitResult::kDone;
  }

  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    version_.fetch_add(1, std::memory_order_release);
    changed_.notify_all();
  }

 private:
  // Waits, `lock` held on entry and on return, until `ready()` or the deadline, as put_off moves
  // it (false then).
  // A waiter with a core of its own (spin_ > 0) never sleeps on the condition variable: it
  // spins, then naps and looks again, so that the thread it waits for hands over without a
  // wake-up call (a futex syscall of 10-15 us on a VM, paid by the sender, which is usually
  // the busy rank). Ranks sharing cores sleep until woken: the wake-up hands them the core.
  template <class Ready>
  bool wait_until(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Ready ready) {
    if (spin_.count() == 0) {
      while (!changed_.wait_until(lock, deadline, ready))
        if (!put_off(deadline, Clock::now())) return false;
      return true;
    }
    const auto spin_until = Clock::now() + spin_;
    Naps naps(Naps::kOwnCore);
    for (;;) {
      if (ready()) return true;
      const auto now = Clock::now();
      if (now >= deadline && !put_off(deadline, now)) return false;
      const std::uint64_t seen = version_.load(std::memory_order_acquire);
      lock.unlock();
      if (now < spin_until) {
        while (version_.load(std::memory_order_acquire) == seen && Clock::now() < spin_until) {
        }
      } else if (version_.load(std::memory_order_acquire) == seen) {
        naps.take();
      }
      lock.lock();
    }
  }
  // `deadline` has passed at `now`: moves it on where the step's ranks are getting on (false:
  // they are not, the wait gives up).
  bool put_off(Clock::time_point& deadline, Clock::time_point now) const {
    if (progress_ == nullptr) return false;
    deadline = progress_->extended(deadline, now);
    return deadline > now;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<std::uint64_t, Payload>> queue_;
  int capacity_;
  std::chrono::microseconds spin_;
  std::atomic<std::uint64_t> version_{0};
  bool aborted_ = false;
  const StepProgress* progress_;
};

// All mailboxes of a step; mailbox(src, dst) carries src's sends to dst.
template <class Payload>
class InProcessTransport final : public Transport<Payload> {
 public:
  using Clock = std::chrono::steady_clock;

  InProcessTransport(int ranks, int capacity,
                     std::chrono::microseconds spin = std::chrono::microseconds(0),
                     const StepProgress* progress = nullptr)
      : ranks_(ranks),
        in_flight_(static_cast<std::size_t>(ranks)),
        peak_(static_cast<std::size_t>(ranks), 0) {
    boxes_.reserve(static_cast<std::size_t>(ranks) * ranks);
    for (int i = 0; i < ranks * ranks; ++i)
      boxes_.push_back(std::make_unique<Mailbox<Payload>>(capacity, spin, progress));
  }
  Mailbox<Payload>& mailbox(int src, int dst) {
    return *boxes_[static_cast<std::size_t>(src) * ranks_ + dst];
  }
  // A message counts toward its sender's bytes in flight from the moment the sender lets it go
  // (while it waits for room too) until the receiver takes it out of the mailbox.
  WaitResult send(int src, int dst, std::uint64_t name, Payload message,
                  Clock::time_point deadline) override {
    const std::int64_t bytes = bytes_of(message);
    auto& mine = in_flight_[static_cast<std::size_t>(src)];
    const std::int64_t now = mine.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    peak_[static_cast<std::size_t>(src)] = std::max(peak_[static_cast<std::size_t>(src)], now);
    const WaitResult r = mailbox(src, dst).send(name, std::move(message), deadline);
    if (r != WaitResult::kDone) mine.fetch_sub(bytes, std::memory_order_relaxed);
    return r;
  }
  bool has_room(int src, int dst) override { return mailbox(src, dst).has_room(); }
  WaitResult receive(int src, int dst, std::uint64_t name, Payload& out,
                     Clock::time_point deadline) override {
    auto& theirs = in_flight_[static_cast<std::size_t>(src)];
    return mailbox(src, dst).receive(name, out, deadline, [&theirs](const Payload& m) {
      theirs.fetch_sub(bytes_of(m), std::memory_order_relaxed);
    });
  }
  // The most bytes rank r had in flight (written by r's own thread only: read after the step).
  double peak_bytes(int r) const { return static_cast<double>(peak_[static_cast<std::size_t>(r)]); }
  void abort() override {
    for (auto& b : boxes_) b->abort();
  }

 private:
  static std::int64_t bytes_of(const Payload& m) {
    if constexpr (requires { m.bytes; })
      return m.bytes;
    else
      return 0;
  }

  int ranks_;
  std::vector<std::unique_ptr<Mailbox<Payload>>> boxes_;
  std::vector<std::atomic<std::int64_t>> in_flight_;  // per sender
  std::vector<std::int64_t> peak_;                    // per sender
};

}  // namespace ppbench
