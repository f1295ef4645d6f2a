// Runs one training step of a schedule for real: one thread per rank, each
// executing its lowered program (receive, compute, send) in order, tensors
// handed over by the in-process transport, every action timed into the
// common Trace, every rank's kept activations recorded by its arena.
//
// A rank that waits longer than the watchdog allows while no rank works (a
// receive that never arrives, a mailbox that never drains: StepProgress) stops
// the step with an error naming the rank, the instruction and what it waits
// for; a workload that throws stops it the same way, and so does a rank thread
// the system will not start. Threads, errors and the watchdog are the
// executors' shared core (executor_core.h).
//
// The same walk runs one rank of a step whose other ranks live in other processes
// (run_rank_step, over an MPI transport): then the step's clock is shared across processes and
// data parallelism may hook into the walk (RankHooks).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/cpu_cores.h"
#include "core/timer_slack.h"
#include "harness/executor/activation_arena.h"
#include "harness/executor/executor_core.h"
#include "harness/executor/mailbox.h"
#include "harness/executor/rank_passes.h"
#include "harness/executor/stage_work.h"
#include "harness/executor/step_progress.h"
#include "harness/executor/transport.h"
#include "harness/trace.h"
#include "schedules/deps.h"
#include "schedules/lower.h"
#include "schedules/stage_ends.h"

namespace ppbench {

struct StepRecord {
  Trace trace;
  std::vector<ActivationArena> arenas;  // per rank
  // Per rank, the most bytes it had sent that were not yet received (the tensors in flight it
  // allocated); in-process runs only.
  std::vector<double> comm_peak_bytes;
};

// What data parallelism adds to one rank's walk (harness/mpi/gradient_allreduce.h).
struct RankHooks {
  // After the last backward action of `stage` and the sends that follow it, before the rank's
  // next receive or action: the rank hands its input gradient upstream first, so that an
  // optimizer step here never holds back the ranks waiting for it.
  std::function<void(int stage)> stage_done;
  std::function<void()> poll;  // after every compute action
};

template <class Payload>
class CpuExecutor {
 public:
  using Clock = std::chrono::steady_clock;
  using Message = Envelope<Payload>;

  // `work[r]` runs the stages of rank r and is used only by rank r's thread.
  CpuExecutor(const Schedule& s, std::vector<StageWork<Payload>*> work, ExecutorOptions options)
      : schedule_(s),
        program_(lower(s)),
        work_(std::move(work)),
        options_(options),
        stages_(s.placement),
        watchdog_{options.watchdog_seconds} {
    options_.channel_capacity = resolve_channel_capacity(options.channel_capacity, s);
  }

  // Per rank, what the walk calls after each stage's last backward (and its sends) and after
  // every action (the optimizer step of `run --optimizer`); empty: nothing.
  void set_hooks(std::vector<RankHooks> hooks) { hooks_ = std::move(hooks); }

  // Seconds on the current step's clock (for events the hooks record).
  double clock() const { return now(); }
  // Whether the last step's rank threads outnumbered the cores they could run on; then the
  // events the hooks record carry their CPU time too (thread_cpu_seconds()).
  bool shares_cores() const { return shared_cores_ > 0; }

  StepRecord run_step() {
    const int ranks = schedule_.placement.ranks;
    const int cores = options_.cores > 0 ? options_.cores : available_cores();
    shared_cores_ = ranks > cores ? cores : 0;
    StepProgress progress(ranks, watchdog_.patience());
    InProcessTransport<Message> transport(ranks, options_.channel_capacity,
                                          options_.spin(shared_cores_ == 0), &progress);
    StepRecord record;
    record.trace.source = "cpu";
    record.trace.time_unit = "s";
    record.trace.ranks = ranks;
    record.trace.shared_cores = shared_cores_;
    if (shared_cores_ > 0) record.trace.rank_cpu.assign(static_cast<std::size_t>(ranks), 0.0);
    // The process's CPUs, read only where the ranks are to be pinned to them.
    const std::vector<int> cpus = options_.pin_ranks && shared_cores_ == 0
                                      ? cpus_of(available_cpu_mask())
                                      : std::vector<int>{};
    const bool pin = !cpus.empty() && ranks <= std::ssize(cpus);
    if (pin) record.trace.pinned_cpus.assign(static_cast<std::size_t>(ranks), -1);
    for (int r = 0; r < ranks; ++r) record.arenas.emplace_back(r);
    std::vector<std::vector<ComputeEvent>> compute(ranks);
    std::vector<std::vector<CommEvent>> comm(ranks);
    StepErrors errors([&] { transport.abort(); });
    run_rank_threads(
        ranks, errors,
        [&](int r) {
          const auto rank = static_cast<std::size_t>(r);
          if (pin && pin_calling_thread(cpus[rank])) record.trace.pinned_cpus[rank] = cpus[rank];
          if (shared_cores_ == 0) tighten_timer_slack();  // its waits nap (mailbox.h)
          const ThreadCpuTimer cpu(shared_cores_ > 0);
          run_rank(r, transport, errors, record.arenas[r], compute[r], comm[r],
                   hooks_.empty() ? nullptr : &hooks_[rank], &progress);
          if (shared_cores_ > 0) record.trace.rank_cpu[rank] = cpu.seconds();
        },
        [&] { t0_ = Clock::now(); });
    errors.rethrow();
    for (int r = 0; r < ranks; ++r) record.comm_peak_bytes.push_back(transport.peak_bytes(r));
    for (int r = 0; r < ranks; ++r) {
      record.trace.compute.insert(record.trace.compute.end(), compute[r].begin(), compute[r].end());
      record.trace.comm.insert(record.trace.comm.end(), comm[r].begin(), comm[r].end());
      const auto& samples = record.arenas[r].samples();
      record.trace.memory.insert(record.trace.memory.end(), samples.begin(), samples.end());
    }
    return record;
  }

  // Rank r's part of a step whose other ranks run elsewhere, on the calling thread. Times are
  // seconds since `origin` plus `shift` (the step's clock shared by every process); the trace
  // and the arena hold rank r only. A failure is thrown as an ExecutionError naming rank r.
  // `shared_cores`: the cores the job's processes share where they outnumber them
  // (mpi::core_sharing's replay_cores), else 0; then the actions and the rank record their CPU
  // time, as rank threads sharing cores do (Trace::rank_cpu holds rank r's).
  StepRecord run_rank_step(int r, Transport<Message>& transport, Clock::time_point origin,
                           double shift, const RankHooks& hooks = {}, int shared_cores = 0) {
    StepRecord record;
    record.trace.source = "cpu";
    record.trace.time_unit = "s";
    record.trace.ranks = schedule_.placement.ranks;
    record.trace.shared_cores = shared_cores_ = shared_cores;
    record.arenas.emplace_back(r);
    t0_ = origin;
    shift_ = shift;
    StepErrors errors([&] { transport.abort(); });
    const ThreadCpuTimer cpu(shared_cores_ > 0);
    try {
      run_rank(r, transport, errors, record.arenas.front(), record.trace.compute, record.trace.comm,
               &hooks);
      if (!errors.failed() && transport.drain(r, watchdog_.deadline()) == WaitResult::kTimedOut)
        errors.fail(
            StepFailure::kWatchdog, r,
            watchdog_.message(r, "the end of its step", "a message it sent is never taken"));
    } catch (const std::exception& e) {
      errors.fail(r, e);
    }
    errors.rethrow();
    if (shared_cores_ > 0) {
      record.trace.rank_cpu.assign(static_cast<std::size_t>(record.trace.ranks), 0.0);
      record.trace.rank_cpu[static_cast<std::size_t>(r)] = cpu.seconds();
    }
    const auto& samples = record.arenas.front().samples();
    record.trace.memory.assign(samples.begin(), samples.end());
    return record;
  }

 private:
  double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count() + shift_; }

  // Per rank, the index of each stage's last backward compute instruction (for RankHooks).
  std::vector<std::pair<std::size_t, int>> last_backwards(int r) const {
    const auto& prog = program_.ranks[static_cast<std::size_t>(r)];
    return stage_last_backwards(prog.size(), [&prog](std::size_t i) {
      return prog[i].kind == Instr::Kind::Compute ? &prog[i].action : nullptr;
    });
  }

  // What `progress` learns of one rank: it works from here to the end of its walk, except
  // inside `waiting`.
  class Working {
   public:
    explicit Working(StepProgress* progress) : progress_(progress) {}
    ~Working() {
      if (progress_ != nullptr) progress_->stops();
    }
    Working(const Working&) = delete;
    Working& operator=(const Working&) = delete;
    template <class Wait>
    WaitResult waiting(Wait wait) {
      if (progress_ == nullptr) return wait();
      progress_->stops();
      struct Resumes {
        StepProgress* progress;
        ~Resumes() { progress->resumes(); }
      } resumes{progress_};  // also where the wait throws: the walk's end stops it once
      return wait();
    }

   private:
    StepProgress* progress_;
  };

  // Rank r's lowered program in order; a failure is recorded in `errors` (the first one
  // aborts the transport, and every other rank then returns at its next wait). `progress`: the
  // step's, where every rank runs in this process.
  void run_rank(int r, Transport<Message>& transport, StepErrors& errors, ActivationArena& arena,
                std::vector<ComputeEvent>& compute, std::vector<CommEvent>& comm,
                const RankHooks* hooks = nullptr, StepProgress* progress = nullptr) {
    Working working(progress);
    const Placement& p = schedule_.placement;
    StageWork<Payload>& work = *work_[r];
    RankPasses<Payload> passes(work, p);
    const auto& prog = program_.ranks[r];
    std::vector<std::pair<std::size_t, int>> stage_ends;
    if (hooks != nullptr && hooks->stage_done) stage_ends = last_backwards(r);
    // Stages whose last backward has run, their stage_done not called yet: it waits for the
    // sends after that action (lower.h puts them right after it), so that the gradient leaves
    // before the update runs.
    std::vector<int> done;
    done.reserve(stage_ends.size());
    auto finish_stages = [&] {
      if (done.empty()) return;
      for (int stage : done) hooks->stage_done(stage);
      done.clear();
      // The rank was outside the transport for a while: let what it sent move on (MPI
      // progresses only inside calls, and the next action may come without one).
      transport.progress();
    };
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const Instr& in = prog[i];
      if (in.kind != Instr::Kind::Send) finish_stages();
      if (in.kind == Instr::Kind::Compute) {
        // Where ranks share cores the wall time also holds other ranks' slices: the CPU time
        // is what the replay on those cores needs (a syscall each, so only there).
        const ThreadCpuTimer cpu(shared_cores_ > 0);
        const double begin = now();
        passes.run(in.action.task);
        if (in.action.paired()) {
          // Between the halves the new forward's activations and the backward's micro-batch's
          // are held at once: a sample of its own (the memory model's, run_record.cpp).
          arena.set_live(now(), stages_.saved_bytes(r, work));
          passes.run(in.action.partner);
        }
        const double end = now();
        compute.push_back({r, begin, end, in.action, cpu.seconds()});
        arena.set_live(end, stages_.saved_bytes(r, work));
        arena.note_peak(static_cast<double>(work.transient_peak_bytes()));
        transport.progress();
        if (hooks != nullptr) {
          for (const auto& [at, stage] : stage_ends)
            if (at == i) done.push_back(stage);
          if (hooks->poll) hooks->poll();
        }
        continue;
      }
      const std::uint64_t name = message_name(in.payload);
      const bool sending = in.kind == Instr::Kind::Send;
      WaitResult result;
      if (sending) {
        const bool room = transport.has_room(r, in.peer);
        Message e{passes.take(name), now()};
        e.bytes = message_bytes(e.payload);
        const double begin = e.sent_at;
        result = working.waiting(
            [&] { return transport.send(r, in.peer, name, std::move(e), watchdog_.deadline()); });
        // Sends follow the action whose outputs they carry (lower.h): the rank's last event.
        if (result == WaitResult::kDone && room && !compute.empty()) {
          compute.back().send += now() - begin;
          ++compute.back().sends;
        }
      } else {
        Message e;
        const double posted = now();
        result = working.waiting(
            [&] { return transport.receive(in.peer, r, name, e, watchdog_.deadline()); });
        if (result == WaitResult::kDone) {
          // The hand-over latency: from when both sides were ready to
          // when the tensor was in hand, not the receiver's own lateness.
          comm.push_back(
              {in.peer, r, std::max(posted, e.sent_at), now(), in.payload, e.sent_at < posted});
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
    finish_stages();
  }

  const Schedule& schedule_;
  Program program_;
  std::vector<StageWork<Payload>*> work_;
  ExecutorOptions options_;
  RankStages stages_;
  Watchdog watchdog_;
  Clock::time_point t0_;
  double shift_ = 0;
  int shared_cores_ = 0;  // the last step's: the cores its ranks shared, 0 if each had one
  std::vector<RankHooks> hooks_;
};

}  // namespace ppbench
