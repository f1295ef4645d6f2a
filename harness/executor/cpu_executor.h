// Runs one training step of a schedule for real: one thread per rank, each
// executing its lowered program (receive, compute, send) in order, tensors
// handed over by the in-process transport, every action timed into the
// common Trace, every rank's kept activations recorded by its arena.
//
// A rank that waits longer than the watchdog allows (a receive that never
// arrives, a mailbox that never drains) stops the step with an error naming
// the rank, the instruction and what it waits for; a workload that throws
// stops it the same way, and so does a rank thread the system will not start.
// The step never hangs. Threads, errors and the watchdog are the executors'
// shared core (executor_core.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness/executor/activation_arena.h"
#include "harness/executor/executor_core.h"
#include "harness/executor/mailbox.h"
#include "harness/executor/rank_passes.h"
#include "harness/executor/stage_work.h"
#include "harness/trace.h"
#include "schedules/deps.h"
#include "schedules/lower.h"

namespace ppbench {

struct StepRecord {
  Trace trace;
  std::vector<ActivationArena> arenas;  // per rank
};

template <class Payload>
class CpuExecutor {
 public:
  using Clock = std::chrono::steady_clock;

  // `work[r]` runs the stages of rank r and is used only by rank r's thread.
  CpuExecutor(const Schedule& s, std::vector<StageWork<Payload>*> work, ExecutorOptions options)
      : schedule_(s),
        program_(lower(s)),
        work_(std::move(work)),
        options_(options),
        stages_(s.placement),
        watchdog_{options.watchdog_seconds} {}

  StepRecord run_step() {
    const int ranks = schedule_.placement.ranks;
    const bool own_cores = ranks <= static_cast<int>(std::thread::hardware_concurrency());
    const auto spin =
        std::chrono::microseconds(own_cores ? static_cast<long>(options_.spin_microseconds) : 0);
    InProcessTransport<Envelope> transport(ranks, options_.channel_capacity, spin);
    StepRecord record;
    record.trace.source = "cpu";
    record.trace.time_unit = "s";
    record.trace.ranks = ranks;
    for (int r = 0; r < ranks; ++r) record.arenas.emplace_back(r);
    std::vector<std::vector<ComputeEvent>> compute(ranks);
    std::vector<std::vector<CommEvent>> comm(ranks);
    StepErrors errors([&] { transport.abort(); });
    run_rank_threads(
        ranks, errors,
        [&](int r) { run_rank(r, transport, errors, record.arenas[r], compute[r], comm[r]); },
        [&] { t0_ = Clock::now(); });
    errors.rethrow();
    for (int r = 0; r < ranks; ++r) {
      record.trace.compute.insert(record.trace.compute.end(), compute[r].begin(), compute[r].end());
      record.trace.comm.insert(record.trace.comm.end(), comm[r].begin(), comm[r].end());
      const auto& samples = record.arenas[r].samples();
      record.trace.memory.insert(record.trace.memory.end(), samples.begin(), samples.end());
    }
    return record;
  }

 private:
  struct Envelope {
    Payload payload{};
    double sent_at = 0;
  };

  double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  // Rank r's lowered program in order; a failure is recorded in `errors` (the first one
  // aborts the transport, and every other rank then returns at its next wait).
  void run_rank(int r, InProcessTransport<Envelope>& transport, StepErrors& errors,
                ActivationArena& arena, std::vector<ComputeEvent>& compute,
                std::vector<CommEvent>& comm) {
    const Placement& p = schedule_.placement;
    StageWork<Payload>& work = *work_[r];
    RankPasses<Payload> passes(work, p);
    for (const Instr& in : program_.ranks[r]) {
      if (in.kind == Instr::Kind::Compute) {
        const double begin = now();
        passes.run(in.action.task);
        if (in.action.paired) passes.run(in.action.partner);
        const double end = now();
        compute.push_back({r, begin, end, in.action});
        arena.set_live(end, stages_.saved_bytes(r, work));
        continue;
      }
      const std::uint64_t name = message_name(in.payload);
      const bool sending = in.kind == Instr::Kind::Send;
      WaitResult result;
      if (sending) {
        Envelope e{passes.take(name), now()};
        result = transport.mailbox(r, in.peer).send(name, std::move(e), watchdog_.deadline());
      } else {
        Envelope e;
        const double posted = now();
        result = transport.mailbox(in.peer, r).receive(name, e, watchdog_.deadline());
        if (result == WaitResult::kDone) {
          // The hand-over latency: from when both sides were ready to
          // when the tensor was in hand, not the receiver's own lateness.
          comm.push_back({in.peer, r, std::max(posted, e.sent_at), now(), in.payload});
          passes.put(name, std::move(e.payload));
        }
      }
      if (result == WaitResult::kAborted) return;
      if (result == WaitResult::kTimedOut)
        return errors.fail(
            StepFailure::kWatchdog, r,
            watchdog_.message(r, to_string(in),
                              sending
                                  ? "the mailbox to rank " + std::to_string(in.peer) + " stays full"
                                  : "nothing arrives from rank " + std::to_string(in.peer)));
    }
  }

  const Schedule& schedule_;
  Program program_;
  std::vector<StageWork<Payload>*> work_;
  ExecutorOptions options_;
  RankStages stages_;
  Watchdog watchdog_;
  Clock::time_point t0_;
};

}  // namespace ppbench
