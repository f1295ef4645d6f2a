// What the CPU executor (harness/executor/cpu_executor.h) and the GPU executor
// (harness/cuda/cuda_executor.h) share: one thread per rank released together, the first
// failure of a step kept as a typed error (later ones are its consequences), the watchdog's
// patience and message, and the stages each rank holds. Each executor adds only how a rank
// walks its program: a mailbox per rank pair on the CPU, streams, events and a transport on
// GPUs.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/executor/stage_work.h"
#include "schedules/lower.h"
#include "schedules/placement.h"

namespace ppbench {

// What a run asks of its executor (the CPU executor uses all of it, the GPU executor the
// watchdog).
struct ExecutorOptions {
  // Messages one (src, dst) mailbox holds; 0: as many as `run` gives the schedule by default
  // (resolve_channel_capacity).
  int channel_capacity = 0;
  // How long a rank may wait on the transport; on CPU threads, how long every rank may have
  // waited (StepProgress).
  double watchdog_seconds = 60;
  // How long a waiting rank spins before it naps between looks (mailbox.h), used only when
  // every rank has a hardware thread of its own (spinning on a shared core only delays the
  // thread it waits for).
  double spin_microseconds = 50;
  // The cores the rank threads may run on (0: this process's, core/cpu_cores.h). Fewer than the
  // ranks: waiters sleep at once, and the step's trace carries each action's CPU time.
  int cores = 0;
  // Pin rank r's thread to the r-th CPU this process may use, where every rank has one of its
  // own: left to the scheduler, two rank threads now and then share a core for part of a step
  // (about one step in four on a 2-core VM, each +15 to +55 % slower). Ranks sharing cores stay
  // unpinned, as the replay on shared cores assumes (any free core takes the next ready action).
  bool pin_ranks = true;

  // How long a waiter spins before it naps: spin_microseconds where every rank (or process)
  // has a core of its own, else not at all.
  std::chrono::microseconds spin(bool own_cores) const {
    return std::chrono::microseconds(own_cores ? static_cast<long>(spin_microseconds) : 0);
  }
};

// Why a step stopped.
enum class StepFailure {
  kWatchdog,     // a rank waited longer than the watchdog allows (CPU threads: no rank working)
  kWork,         // a pass, a transfer or a device call failed on a rank
  kCapture,      // capturing the step as CUDA graphs failed
  kOutOfMemory,  // a rank ran out of host or device memory: the machine's limit
  kEnvironment,  // the machine failed under a rank: its MPI or NCCL library, a driver, a peer
};

class ExecutionError : public std::runtime_error {
 public:
  ExecutionError(StepFailure kind, int rank, const std::string& what)
      : std::runtime_error(what), kind_(kind), rank_(rank) {}
  StepFailure kind() const { return kind_; }
  int rank() const { return rank_; }  // the rank that failed first

 private:
  StepFailure kind_;
  int rank_;
};

// The first failure of a step, from any rank's thread. Recording it calls `abort` once, which
// must make every blocked wait of the other ranks return at once (they then stop quietly).
// Recording never throws, not even where memory has run out (it is called from catch handlers
// on the rank threads, where an exception would end the process): a message that cannot be
// copied is kept, cut to kFixedText - 1 characters, in a buffer of its own, and `abort` is
// called whatever happens to the text.
class StepErrors {
 public:
  static constexpr std::size_t kFixedText = 256;

  explicit StepErrors(std::function<void()> abort) : abort_(std::move(abort)) {}

  // What rank r threw: "rank r: <what>", of kind kOutOfMemory where memory ran out
  // (std::bad_alloc, ppbench::OutOfMemory), kEnvironment where the machine failed under it (any
  // other ppbench::EnvironmentError: an MPI or NCCL call, say), else kWork.
  void fail(int rank, const std::exception& e) noexcept;

  void fail(StepFailure kind, int rank, const std::string& message) noexcept {
    record(kind, rank, &message, message.c_str());
  }
  bool failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    failed_ = false;
    message_.clear();
    fixed_[0] = '\0';
  }
  // Throws the first failure, `context` prefixed to its message: as an ExecutionError, or as
  // ppbench::OutOfMemory where memory ran out and ppbench::EnvironmentError where the machine
  // failed, so that the run ends as the machine's problem (exit code 3), not a failed step.
  void rethrow(const std::string& context = "") const;

 private:
  // Keeps the first failure: a copy of `message`, or `fallback` (cut to fit fixed_) where there
  // is none or copying it runs out of memory; then aborts.
  void record(StepFailure kind, int rank, const std::string* message,
              const char* fallback) noexcept;

  std::function<void()> abort_;
  mutable std::mutex mutex_;
  bool failed_ = false;
  StepFailure kind_ = StepFailure::kWork;
  int rank_ = -1;
  std::string message_;
  char fixed_[kFixedText] = {};  // the message where it could not be copied; "" when none
};

// Runs body(r) for every rank on a thread of its own, releasing them together (after
// `on_release`, e.g. to take the step's time origin), and joins them. A body that throws fails
// the step on its rank. A thread the system refuses to start (a limit on threads or on memory
// for stacks) is a ppbench::EnvironmentError; anything else that fails before the release (an
// allocation for a thread, `on_release`) is rethrown as it is. Either way the threads already
// started are released at once with the step failed, so they return without work and nothing
// waits forever.
void run_rank_threads(int ranks, StepErrors& errors, const std::function<void(int)>& body,
                      const std::function<void()>& on_release = {});

// How long a rank may wait, and the one message every executor gives when it waited longer.
struct Watchdog {
  using Clock = std::chrono::steady_clock;
  double seconds = 60;

  Clock::duration patience() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  Clock::time_point deadline() const { return Clock::now() + patience(); }
  // "watchdog: rank 2 waited 60 s at recv(B3.1<-3) (nothing arrives from rank 3)"
  std::string message(int rank, const std::string& at, const std::string& why) const;
};

// The stages each rank holds (placement order), and the bytes they keep for later passes.
class RankStages {
 public:
  explicit RankStages(const Placement& p);
  const std::vector<int>& of(int rank) const { return stages_.at(static_cast<std::size_t>(rank)); }

  template <class Payload>
  double saved_bytes(int rank, const StageWork<Payload>& work) const {
    double total = 0;
    for (int st : of(rank)) total += static_cast<double>(work.saved_bytes(st));
    return total;
  }

 private:
  std::vector<std::vector<int>> stages_;
};

}  // namespace ppbench
