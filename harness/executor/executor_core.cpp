#include "harness/executor/executor_core.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <latch>
#include <new>
#include <system_error>
#include <thread>

#include "core/error.h"

namespace ppbench {

void run_rank_threads(int ranks, StepErrors& errors, const std::function<void(int)>& body,
                      const std::function<void()>& on_release) {
  std::latch start(ranks + 1);
  std::atomic<bool> cancelled{false};
  std::exception_ptr failure;  // what stopped the start, thrown once every thread has joined
  int started = 0;
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(ranks));
    try {
      for (; started < ranks; ++started)
        threads.emplace_back([&, r = started] {
          start.arrive_and_wait();
          if (cancelled) return;
          try {
            body(r);
          } catch (const std::exception& e) {
            errors.fail(r, e);
          }
        });
      if (on_release) on_release();
    } catch (...) {
      // Whatever failed (the system refusing a thread, an allocation for one's state, the
      // release), the threads already started wait in the latch for ranks that never come: let
      // them through without work before they are joined. Nothing here allocates.
      failure = std::current_exception();
      cancelled = true;
      start.count_down(ranks - started);  // the threads that never started
    }
    start.arrive_and_wait();
  }  // joins
  if (!failure) return;
  if (started < ranks) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::system_error& e) {
      throw EnvironmentError("cannot start the thread of rank " + std::to_string(started) + " of " +
                             std::to_string(ranks) + " (" + e.what() +
                             "): the system limits threads or their stacks (see ulimit -u, "
                             "ulimit -s and the memory available)");
    }
  }
  std::rethrow_exception(failure);
}

void StepErrors::fail(int rank, const std::exception& e) noexcept {
  const bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                      dynamic_cast<const OutOfMemory*>(&e) != nullptr;
  const bool machine = dynamic_cast<const EnvironmentError*>(&e) != nullptr;
  const StepFailure kind = memory    ? StepFailure::kOutOfMemory
                           : machine ? StepFailure::kEnvironment
                                     : StepFailure::kWork;
  std::string message;
  try {
    message = "rank " + std::to_string(rank) + ": " + e.what();
  } catch (...) {
    // Memory ran out (most likely what the rank threw too): the same text, in a fixed buffer.
    char text[kFixedText];
    std::snprintf(text, sizeof text, "rank %d: %s", rank, e.what());
    return record(kind, rank, nullptr, text);
  }
  record(kind, rank, &message, message.c_str());
}

void StepErrors::record(StepFailure kind, int rank, const std::string* message,
                        const char* fallback) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (failed_) return;
    failed_ = true;
    kind_ = kind;
    rank_ = rank;
    bool copied = false;
    if (message != nullptr) {
      try {
        message_ = *message;
        copied = true;
      } catch (...) {
        // Out of memory: the fixed text below.
      }
    }
    if (!copied) std::snprintf(fixed_, sizeof fixed_, "%s", fallback);
  }
  if (!abort_) return;
  try {
    abort_();
  } catch (...) {
    // An abort that fails leaves the other ranks to their watchdogs: the most that can be done.
  }
}

void StepErrors::rethrow(const std::string& context) const {
  std::lock_guard lock(mutex_);
  if (!failed_) return;
  const std::string message = context + (fixed_[0] != '\0' ? std::string(fixed_) : message_);
  if (kind_ == StepFailure::kOutOfMemory) throw OutOfMemory(message);
  if (kind_ == StepFailure::kEnvironment) throw EnvironmentError(message);
  throw ExecutionError(kind_, rank_, message);
}

std::string Watchdog::message(int rank, const std::string& at, const std::string& why) const {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", seconds);
  return "watchdog: rank " + std::to_string(rank) + " waited " + limit + " s at " + at + " (" +
         why + ")";
}

RankStages::RankStages(const Placement& p) : stages_(static_cast<std::size_t>(p.ranks)) {
  for (int st = 0; st < p.stages(); ++st)
    stages_[static_cast<std::size_t>(p.stage_rank[st])].push_back(st);
}

}  // namespace ppbench
