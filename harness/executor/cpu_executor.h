// Runs one training step of a schedule for real: one thread per rank, each
// executing its lowered program (receive, compute, send) in order, tensors
// handed over by the in-process transport, every action timed into the
// common Trace, every rank's kept activations recorded by its arena.
//
// A rank that waits longer than the watchdog allows (a receive that never
// arrives, a mailbox that never drains) stops the step with an error naming
// the rank, the instruction and what it waits for; a workload that throws
// stops it the same way. The step never hangs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "harness/executor/activation_arena.h"
#include "harness/executor/mailbox.h"
#include "harness/executor/rank_passes.h"
#include "harness/executor/stage_work.h"
#include "harness/trace.h"
#include "schedules/deps.h"
#include "schedules/lower.h"

namespace ppbench {

class ExecutionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ExecutorOptions {
  int channel_capacity = 4;       // messages one (src, dst) mailbox holds
  double watchdog_seconds = 60;   // longest a rank may wait on the transport
  // How long a waiting rank spins before it sleeps, used only when every
  // rank has a hardware thread of its own (spinning on a shared core only
  // delays the thread it waits for).
  double spin_microseconds = 50;
};

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
      : schedule_(s), program_(lower(s)), work_(std::move(work)), options_(options) {
    stages_of_rank_.resize(s.placement.ranks);
    for (int st = 0; st < s.stages(); ++st) stages_of_rank_[s.placement.stage_rank[st]].push_back(st);
  }

  StepRecord run_step() {
    const int ranks = schedule_.placement.ranks;
    const bool own_cores = ranks <= static_cast<int>(std::thread::hardware_concurrency());
    const auto spin = std::chrono::microseconds(
        own_cores ? static_cast<long>(options_.spin_microseconds) : 0);
    InProcessTransport<Envelope> transport(ranks, options_.channel_capacity, spin);
    StepRecord record;
    record.trace.source = "cpu";
    record.trace.time_unit = "s";
    record.trace.ranks = ranks;
    for (int r = 0; r < ranks; ++r) record.arenas.emplace_back(r);
    std::vector<std::vector<ComputeEvent>> compute(ranks);
    std::vector<std::vector<CommEvent>> comm(ranks);
    error_.clear();
    std::latch start(ranks + 1);
    {
      std::vector<std::jthread> threads;
      threads.reserve(ranks);
      for (int r = 0; r < ranks; ++r)
        threads.emplace_back([&, r] {
          start.arrive_and_wait();
          run_rank(r, transport, record.arenas[r], compute[r], comm[r]);
        });
      t0_ = Clock::now();
      start.arrive_and_wait();
    }
    if (!error_.empty()) throw ExecutionError(error_);
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


  void fail(const std::string& message, InProcessTransport<Envelope>& transport) {
    {
      std::lock_guard lock(error_mutex_);
      if (error_.empty()) error_ = message;
    }
    transport.abort();
  }

  void run_rank(int r, InProcessTransport<Envelope>& transport, ActivationArena& arena,
                std::vector<ComputeEvent>& compute, std::vector<CommEvent>& comm) {
    const Placement& p = schedule_.placement;
    StageWork<Payload>& work = *work_[r];
    RankPasses<Payload> passes(work, p);
    auto saved_bytes = [&] {
      double total = 0;
      for (int st : stages_of_rank_[r]) total += static_cast<double>(work.saved_bytes(st));
      return total;
    };
    const auto patience = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options_.watchdog_seconds));

    try {
      for (const Instr& in : program_.ranks[r]) {
        if (in.kind == Instr::Kind::Compute) {
          const double begin = now();
          passes.run(in.action.task);
          if (in.action.paired) passes.run(in.action.partner);
          const double end = now();
          compute.push_back({r, begin, end, in.action});
          arena.set_live(end, saved_bytes());
          continue;
        }
        const std::uint64_t name = message_name(in.payload);
        const bool sending = in.kind == Instr::Kind::Send;
        WaitResult result;
        if (sending) {
          Envelope e{passes.take(name), now()};
          result = transport.mailbox(r, in.peer).send(name, std::move(e), Clock::now() + patience);
        } else {
          Envelope e;
          const double posted = now();
          result = transport.mailbox(in.peer, r).receive(name, e, Clock::now() + patience);
          if (result == WaitResult::kDone) {
            // The hand-over latency: from when both sides were ready to
            // when the tensor was in hand, not the receiver's own lateness.
            comm.push_back({in.peer, r, std::max(posted, e.sent_at), now(), in.payload});
            passes.put(name, std::move(e.payload));
          }
        }
        if (result == WaitResult::kAborted) return;
        if (result == WaitResult::kTimedOut)
          return fail("watchdog: rank " + std::to_string(r) + " waited " +
                          std::to_string(options_.watchdog_seconds) + " s at " + to_string(in) +
                          (sending ? " (the mailbox to rank " + std::to_string(in.peer) + " stays full)"
                                   : " (nothing arrives from rank " + std::to_string(in.peer) + ")"),
                      transport);
      }
    } catch (const std::exception& e) {
      fail("rank " + std::to_string(r) + ": " + e.what(), transport);
    }
  }

  const Schedule& schedule_;
  Program program_;
  std::vector<StageWork<Payload>*> work_;
  ExecutorOptions options_;
  std::vector<std::vector<int>> stages_of_rank_;
  Clock::time_point t0_;
  std::mutex error_mutex_;
  std::string error_;
};

}  // namespace ppbench
