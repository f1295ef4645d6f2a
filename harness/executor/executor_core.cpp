#include "harness/executor/executor_core.h"

#include <atomic>
#include <cstdio>
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
  std::string refused;
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(ranks));
    int started = 0;
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
    } catch (const std::system_error& e) {
      refused = "cannot start the thread of rank " + std::to_string(started) + " of " +
                std::to_string(ranks) + " (" + e.what() +
                "): the system limits threads or their stacks (see ulimit -u, ulimit -s and the "
                "memory available)";
      cancelled = true;
      start.count_down(ranks - started);  // the threads that never started
    }
    if (!cancelled && on_release) on_release();
    start.arrive_and_wait();
  }  // joins
  if (!refused.empty()) throw EnvironmentError(refused);
}

void StepErrors::fail(int rank, const std::exception& e) {
  const bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                      dynamic_cast<const OutOfMemory*>(&e) != nullptr;
  const bool machine = dynamic_cast<const EnvironmentError*>(&e) != nullptr;
  const StepFailure kind = memory    ? StepFailure::kOutOfMemory
                           : machine ? StepFailure::kEnvironment
                                     : StepFailure::kWork;
  fail(kind, rank, "rank " + std::to_string(rank) + ": " + e.what());
}

void StepErrors::rethrow(const std::string& context) const {
  std::lock_guard lock(mutex_);
  if (!failed_) return;
  if (kind_ == StepFailure::kOutOfMemory) throw OutOfMemory(context + message_);
  if (kind_ == StepFailure::kEnvironment) throw EnvironmentError(context + message_);
  throw ExecutionError(kind_, rank_, context + message_);
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
