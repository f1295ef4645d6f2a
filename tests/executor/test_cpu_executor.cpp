// The CPU executor on a toy workload small enough to differentiate by hand:
// every schedule must compute exactly the single-device step's gradients,
// and a stuck or failing rank must become an error, never a hang.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/executor/cpu_executor.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace ppbench {
namespace {

// A chain of model parts h <- tanh(w_k h); the loss of a micro-batch is the
// last part's output, scaled by 1/N so the step's loss is the mean. Stage s
// runs model part s - chain_begin; two-direction schedules hold each part
// twice, and the two copies' gradients are summed.
struct ToyModel {
  std::vector<double> weights;
  std::vector<double> inputs;  // one per global micro-batch

  static ToyModel make(int parts, int microbatches) {
    ToyModel m;
    for (int k = 0; k < parts; ++k) m.weights.push_back(0.5 + 0.1 * k);
    for (int i = 0; i < microbatches; ++i) m.inputs.push_back(0.3 + 0.05 * i);
    return m;
  }

  // d(mean loss)/dw_k on one device, micro-batch by micro-batch.
  std::vector<double> reference_grads() const {
    std::vector<double> grads(weights.size(), 0.0);
    for (double x : inputs) {
      std::vector<double> h{x};
      for (double w : weights) h.push_back(std::tanh(w * h.back()));
      double g = 1.0 / static_cast<double>(inputs.size());
      for (int k = static_cast<int>(weights.size()) - 1; k >= 0; --k) {
        const double local = g * (1 - h[k + 1] * h[k + 1]);
        grads[k] += local * h[k];
        g = local * weights[k];
      }
    }
    return grads;
  }
};

class ToyRank : public StageWork<double> {
 public:
  ToyRank(const ToyModel& model, const Placement& p, int rank, bool fail = false)
      : model_(model), p_(p), rank_(rank), fail_(fail) {}

  double forward(int stage, int mb, double input) override {
    if (fail_) throw std::runtime_error("toy failure on rank " + std::to_string(rank_));
    const double x = p_.is_first(stage) ? model_.inputs[global_mb(stage, mb)] : input;
    const double y = std::tanh(weight(stage) * x);
    saved_[{stage, mb}] = {x, y, 0};
    return y;
  }
  double backward(int stage, int mb, double grad, bool split) override {
    auto& s = saved_.at({stage, mb});
    const double g = p_.is_last(stage) ? 1.0 / static_cast<double>(model_.inputs.size()) : grad;
    s.local = g * (1 - s.y * s.y);
    const double grad_in = s.local * weight(stage);
    if (!split) backward_weight(stage, mb);
    return grad_in;
  }
  void backward_weight(int stage, int mb) override {
    auto it = saved_.find({stage, mb});
    grads[stage] += it->second.local * it->second.x;
    saved_.erase(it);
  }
  std::size_t saved_bytes(int stage) const override {
    std::size_t n = 0;
    for (const auto& [key, s] : saved_) n += key.first == stage ? sizeof(Saved) : 0;
    return n;
  }

  std::map<int, double> grads;  // stage -> dL/dw of its part

 private:
  struct Saved {
    double x, y, local;
  };
  int part(int stage) const { return p_.part(stage); }
  double weight(int stage) const { return model_.weights[part(stage)]; }
  // Chain c's micro-batches follow those of the chains before it.
  int global_mb(int stage, int mb) const {
    int base = 0;
    for (int c = 0; c < p_.stage_chain[stage]; ++c) base += p_.chain_microbatches[c];
    return base + mb;
  }

  const ToyModel& model_;
  const Placement& p_;
  int rank_;
  bool fail_;
  std::map<std::pair<int, int>, Saved> saved_;
};

struct ToyRun {
  std::vector<double> grads;  // per model part, copies summed
  StepRecord record;
};

ToyRun run_toy(const Schedule& s, const ToyModel& model, ExecutorOptions options = {},
               int failing_rank = -1) {
  std::vector<ToyRank> ranks;
  for (int r = 0; r < s.placement.ranks; ++r)
    ranks.emplace_back(model, s.placement, r, r == failing_rank);
  std::vector<StageWork<double>*> work;
  for (auto& r : ranks) work.push_back(&r);
  CpuExecutor<double> executor(s, work, options);
  ToyRun out;
  out.record = executor.run_step();
  out.grads.assign(s.placement.stages_per_chain(), 0.0);
  for (const auto& r : ranks)
    for (auto [stage, g] : r.grads) out.grads[s.placement.part(stage)] += g;
  return out;
}

TEST(CpuExecutor, EveryScheduleMatchesTheSingleDeviceStep) {
  std::set<std::string> ran;  // the families that produced at least one schedule
  int runs = 0;
  for (const auto& info : all_schedules())
    for (int d : {1, 2, 4})
      for (int n : {1, 2, 4, 8}) {
        ScheduleParams p{std::string(info.name), d, n, info.uses_chunks ? 2 : 0, 0};
        Schedule s;
        try {
          s = generate(p);
        } catch (const UsageError&) {
          continue;
        }
        ran.insert(std::string(info.name));
        ++runs;
        const ToyModel model = ToyModel::make(s.placement.stages_per_chain(), n);
        const ToyRun run = run_toy(s, model);
        const auto expected = model.reference_grads();
        ASSERT_EQ(run.grads.size(), expected.size());
        for (std::size_t k = 0; k < expected.size(); ++k)
          EXPECT_NEAR(run.grads[k], expected[k], 1e-14 * (1 + std::abs(expected[k])))
              << info.name << " D=" << d << " N=" << n << " part " << k;
        EXPECT_EQ(run.record.trace.compute.size(), s.action_count());
        // Everything kept for a backward is released by the end of the step.
        ASSERT_EQ(run.record.arenas.size(), static_cast<std::size_t>(d));
        for (const auto& arena : run.record.arenas) EXPECT_EQ(arena.live(), 0.0);
      }
  // Every family ran, most of the 12 (D, N) pairs: a generator that began refusing would
  // otherwise leave this test checking nothing.
  EXPECT_EQ(ran.size(), all_schedules().size());
  EXPECT_GT(runs, static_cast<int>(all_schedules().size()) * 6);
}

// Rank threads that outnumber their cores: each action carries its thread's CPU time and each
// rank its thread's CPU time over the step, which holds its actions'; what is computed does not
// change. With a core per rank, neither is measured.
TEST(CpuExecutor, RanksSharingCoresRecordTheirThreadsCpuTime) {
  const Schedule s = generate({"1f1b", 4, 8});
  const ToyModel model = ToyModel::make(4, 8);
  const ToyRun shared = run_toy(s, model, {.cores = 2});
  const Trace& t = shared.record.trace;
  EXPECT_EQ(t.shared_cores, 2);
  ASSERT_EQ(t.rank_cpu.size(), 4u);
  std::vector<double> on_actions(4, 0.0);
  for (const ComputeEvent& e : t.compute) {
    EXPECT_GE(e.cpu, 0.0) << to_string(e.action);
    on_actions[static_cast<std::size_t>(e.rank)] += e.cpu;
  }
  for (std::size_t r = 0; r < 4; ++r) {
    EXPECT_GT(t.rank_cpu[r], 0.0) << "rank " << r;
    EXPECT_GE(t.rank_cpu[r], on_actions[r]) << "rank " << r;
  }
  const auto expected = model.reference_grads();
  for (std::size_t k = 0; k < expected.size(); ++k)
    EXPECT_NEAR(shared.grads[k], expected[k], 1e-14 * (1 + std::abs(expected[k]))) << k;

  const ToyRun own = run_toy(s, model, {.cores = 4});
  EXPECT_EQ(own.record.trace.shared_cores, 0);
  EXPECT_TRUE(own.record.trace.rank_cpu.empty());
  for (const ComputeEvent& e : own.record.trace.compute) EXPECT_EQ(e.cpu, -1.0);
}

// A rank that notes the CPUs its thread may run on, as its first forward sees them.
class AffinityRank : public ToyRank {
 public:
  using ToyRank::ToyRank;
  double forward(int stage, int mb, double input) override {
    if (allowed.empty()) allowed = cpus_of(thread_cpu_mask());
    return ToyRank::forward(stage, mb, input);
  }
  std::vector<int> allowed;

 private:
  static CpuMask thread_cpu_mask() {
    CpuMask mask{};
    cpu_set_t set;
    CPU_ZERO(&set);
    if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0)
      for (int c = 0; c < static_cast<int>(mask.size()) * 8; ++c)
        if (CPU_ISSET(c, &set))
          mask[static_cast<std::size_t>(c / 8)] |= std::uint8_t(1u << (c % 8));
    return mask;
  }
};

std::vector<std::vector<int>> cpus_seen_by_ranks(const Schedule& s, ExecutorOptions options,
                                                 Trace& trace) {
  const ToyModel model = ToyModel::make(s.placement.stages_per_chain(), s.params.microbatches);
  std::vector<AffinityRank> ranks;
  for (int r = 0; r < s.placement.ranks; ++r) ranks.emplace_back(model, s.placement, r);
  std::vector<StageWork<double>*> work;
  for (auto& r : ranks) work.push_back(&r);
  CpuExecutor<double> executor(s, work, options);
  trace = executor.run_step().trace;
  const auto expected = model.reference_grads();
  std::vector<double> grads(expected.size(), 0.0);
  for (const auto& r : ranks)
    for (auto [stage, g] : r.grads) grads[s.placement.part(stage)] += g;
  for (std::size_t k = 0; k < expected.size(); ++k)
    EXPECT_NEAR(grads[k], expected[k], 1e-14 * (1 + std::abs(expected[k]))) << k;
  std::vector<std::vector<int>> seen;
  for (const auto& r : ranks) seen.push_back(r.allowed);
  return seen;
}

// With a core per rank, rank r's thread runs on the r-th CPU of the process and nowhere else,
// and the trace says so; asked not to, or with ranks sharing cores, the threads keep the
// process's CPUs.
TEST(CpuExecutor, EachRankThreadIsPinnedToACpuOfItsOwn) {
  const std::vector<int> cpus = cpus_of(available_cpu_mask());
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs, the process may use " << cpus.size();
  const Schedule s = generate({"1f1b", 2, 4});
  Trace trace;
  const auto pinned = cpus_seen_by_ranks(s, {}, trace);
  ASSERT_EQ(trace.pinned_cpus, (std::vector<int>{cpus[0], cpus[1]}));
  EXPECT_EQ(pinned[0], std::vector<int>{cpus[0]});
  EXPECT_EQ(pinned[1], std::vector<int>{cpus[1]});

  const auto free = cpus_seen_by_ranks(s, {.pin_ranks = false}, trace);
  EXPECT_TRUE(trace.pinned_cpus.empty());
  for (const auto& seen : free) EXPECT_EQ(seen, cpus);

  const auto shared = cpus_seen_by_ranks(s, {.cores = 1}, trace);
  EXPECT_EQ(trace.shared_cores, 1);
  EXPECT_TRUE(trace.pinned_cpus.empty());
  for (const auto& seen : shared) EXPECT_EQ(seen, cpus);
}

TEST(CpuExecutor, TraceKeepsEachRanksOrderAndRecordsTransfers) {
  const Schedule s = generate({"1f1b", 4, 8});
  const ToyRun run = run_toy(s, ToyModel::make(4, 8));
  std::size_t k = 0;
  for (int r = 0; r < 4; ++r)
    for (const Action& a : s.ranks[r]) {
      const auto& e = run.record.trace.compute[k++];
      EXPECT_EQ(e.rank, r);
      EXPECT_EQ(e.action, a);
      EXPECT_LE(e.start, e.end);
    }
  // 3 boundaries x 8 micro-batches x (activation + gradient).
  EXPECT_EQ(run.record.trace.comm.size(), 48u);
  for (const auto& c : run.record.trace.comm) EXPECT_LE(c.start, c.end);
  // Rank 0 keeps at most D activations alive (1F1B's memory claim).
  EXPECT_EQ(run.record.arenas[0].peak(), 4.0 * 24);
}

// Each action's trace event holds the sends of its outputs to other ranks (what the replay
// charges the sender): an activation after a forward, a gradient after a backward, none where
// the consumer is the loss or no stage at all.
TEST(CpuExecutor, EachActionRecordsTheSendsOfItsOutputs) {
  const Schedule s = generate({"1f1b", 4, 8});
  const ToyRun run = run_toy(s, ToyModel::make(4, 8), {.channel_capacity = 64});
  int sends = 0;
  for (const ComputeEvent& e : run.record.trace.compute) {
    const Task& t = e.action.task;
    const int crossing = t.op == Op::F ? t.stage < 3 : t.stage > 0;
    EXPECT_EQ(e.sends, crossing) << to_string(e.action);
    EXPECT_EQ(e.send > 0, crossing == 1) << to_string(e.action);
    sends += e.sends;
  }
  EXPECT_EQ(sends, 48);  // every message, as TraceKeepsEachRanksOrderAndRecordsTransfers counts
}

TEST(CpuExecutor, WatchdogTurnsAStuckRankIntoAnError) {
  // Rank 1 takes GPipe's forwards in reverse: with one-message mailboxes rank
  // 0 cannot send its second activation while rank 1 waits for the fourth.
  Schedule s = generate({"gpipe", 2, 4});
  std::reverse(s.ranks[1].begin(), s.ranks[1].begin() + 4);
  std::reverse(s.ranks[1].begin() + 4, s.ranks[1].end());
  try {
    run_toy(s, ToyModel::make(2, 4), {.channel_capacity = 1, .watchdog_seconds = 0.2});
    ADD_FAILURE() << "expected the watchdog to fire";
  } catch (const ExecutionError& e) {
    EXPECT_NE(std::string(e.what()).find("watchdog: rank"), std::string::npos) << e.what();
  }
  // With room for every message the same order runs and is exact.
  const ToyModel model = ToyModel::make(2, 4);
  const ToyRun run = run_toy(s, model, {.channel_capacity = 4});
  EXPECT_NEAR(run.grads[0], model.reference_grads()[0], 1e-15);
}

// A rank whose forwards each take three times the watchdog's patience: the rank waiting for it
// is not stuck, and the step runs to its end (rank 1's first receive waits that long, which alone
// used to fail the step). No time is asserted, only that the step does not fail; what it relies
// on is a thread whose message has come running within the patience, 0.1 s.
class SlowForwardRank : public ToyRank {
 public:
  using ToyRank::ToyRank;
  double forward(int stage, int mb, double input) override {
    if (stage == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return ToyRank::forward(stage, mb, input);
  }
};

TEST(CpuExecutor, TheWatchdogSparesARankWaitingOnAWorkingPeer) {
  const Schedule s = generate({"1f1b", 2, 2});
  const ToyModel model = ToyModel::make(2, 2);
  std::vector<SlowForwardRank> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back(model, s.placement, r);
  std::vector<StageWork<double>*> work;
  for (auto& r : ranks) work.push_back(&r);
  for (const int cores : {2, 1}) {  // waiters that spin and nap, and waiters that sleep
    for (auto& r : ranks) r.grads.clear();
    CpuExecutor<double> executor(s, work, {.watchdog_seconds = 0.1, .cores = cores});
    EXPECT_NO_THROW(executor.run_step()) << cores << " cores";
    const auto expected = model.reference_grads();
    EXPECT_NEAR(ranks[0].grads[0], expected[0], 1e-15);
    EXPECT_NEAR(ranks[1].grads[1], expected[1], 1e-15);
  }
}

// The watchdog's rule, by the clock it is given: a wait past its deadline goes on while some rank
// works, or stopped working less than a patience ago; it gives up once every rank has waited (or
// finished) for a whole patience.
TEST(StepProgress, AWaitGivesUpOnlyWhenNoRankWorkedForAWholePatience) {
  using Clock = StepProgress::Clock;
  using std::chrono::seconds;
  const Clock::time_point t0{};
  StepProgress progress(2, seconds(10), t0);
  progress.stops(t0 + seconds(1));  // rank 1 waits; rank 0 works on
  // Rank 1's deadline passes while rank 0 works: put off by a patience.
  EXPECT_EQ(progress.extended(t0 + seconds(11), t0 + seconds(11)), t0 + seconds(21));
  progress.stops(t0 + seconds(15));  // rank 0 waits too
  // Both wait: a patience after the last one stopped, no sooner than the deadline it had.
  EXPECT_EQ(progress.extended(t0 + seconds(21), t0 + seconds(21)), t0 + seconds(25));
  EXPECT_EQ(progress.extended(t0 + seconds(30), t0 + seconds(30)), t0 + seconds(30));
  // No rank has worked since 15: at 25 the wait gives up (its deadline is not later than now).
  EXPECT_LE(progress.extended(t0 + seconds(25), t0 + seconds(25)), t0 + seconds(25));
  progress.resumes();  // a message came after all
  EXPECT_EQ(progress.extended(t0 + seconds(25), t0 + seconds(26)), t0 + seconds(36));
}

TEST(StepProgress, ALateStopDoesNotMoveTheLastWorkBack) {
  // Rank 0 read the clock at 5 but was preempted before it said it stopped; rank 1 stopped at 9
  // meanwhile. The step has been idle since 9, not 5.
  using Clock = StepProgress::Clock;
  using std::chrono::seconds;
  const Clock::time_point t0{};
  StepProgress progress(2, seconds(10), t0);
  progress.stops(t0 + seconds(9));
  progress.stops(t0 + seconds(5));
  EXPECT_EQ(progress.extended(t0 + seconds(16), t0 + seconds(16)), t0 + seconds(19));
}

// What the walk tells the hooks of a stage, and when it sends, in the order it does them: each
// rank's walk in a thread of its own over one transport, as the processes of an MPI run do.
TEST(CpuExecutor, AStagesUpdateRunsAfterItsLastBackwardsGradientIsSent) {
  using Message = Envelope<double>;
  // Logs each rank's sends as they begin.
  class LoggingTransport final : public Transport<Message> {
   public:
    LoggingTransport(int ranks, std::vector<std::vector<std::string>>& log)
        : inner_(ranks, 4), log_(log) {}
    WaitResult send(int src, int dst, std::uint64_t name, Message message,
                    Clock::time_point deadline) override {
      log_[static_cast<std::size_t>(src)].push_back("send " + to_string(message_task(name)));
      return inner_.send(src, dst, name, std::move(message), deadline);
    }
    WaitResult receive(int src, int dst, std::uint64_t name, Message& out,
                       Clock::time_point deadline) override {
      return inner_.receive(src, dst, name, out, deadline);
    }
    void abort() override { inner_.abort(); }

   private:
    InProcessTransport<Message> inner_;
    std::vector<std::vector<std::string>>& log_;
  };

  for (const char* family : {"gpipe", "1f1b"}) {
    const Schedule s = generate({family, 2, 3});
    const ToyModel model = ToyModel::make(2, 3);
    std::vector<std::vector<std::string>> log(2);
    LoggingTransport transport(2, log);
    std::vector<ToyRank> ranks;
    for (int r = 0; r < 2; ++r) ranks.emplace_back(model, s.placement, r);
    // One executor per rank, each holding only its own rank's work, as a process does.
    std::vector<std::unique_ptr<CpuExecutor<double>>> executors;
    std::vector<RankHooks> hooks(2);
    for (int r = 0; r < 2; ++r) {
      std::vector<StageWork<double>*> work(2, nullptr);
      work[static_cast<std::size_t>(r)] = &ranks[static_cast<std::size_t>(r)];
      executors.push_back(std::make_unique<CpuExecutor<double>>(s, work, ExecutorOptions{}));
      hooks[static_cast<std::size_t>(r)].stage_done = [&log, r](int stage) {
        log[static_cast<std::size_t>(r)].push_back("update " + std::to_string(stage));
      };
    }
    const auto origin = std::chrono::steady_clock::now();
    StepErrors errors({});
    run_rank_threads(2, errors, [&](int r) {
      executors[static_cast<std::size_t>(r)]->run_rank_step(r, transport, origin, 0,
                                                            hooks[static_cast<std::size_t>(r)]);
    });
    ASSERT_NO_THROW(errors.rethrow()) << family;

    // Rank 1's last backward, B1.m, sends its gradient to rank 0 before stage 1 is updated, and
    // the update comes once, before the rank's next receive (here: none, the end of its walk).
    const auto& last = s.ranks[1].back();
    ASSERT_EQ(last.task.op, Op::B) << family;
    const std::vector<std::string> tail = {"send " + to_string(last.task), "update 1"};
    ASSERT_GE(log[1].size(), 2u) << family;
    EXPECT_EQ(std::vector<std::string>(log[1].end() - 2, log[1].end()), tail) << family;
    // Rank 0 sends no gradient: its update follows its last backward.
    EXPECT_EQ(log[0].back(), "update 0") << family;
    EXPECT_EQ(std::count(log[0].begin(), log[0].end(), "update 0"), 1) << family;
    const auto expected = model.reference_grads();
    EXPECT_NEAR(ranks[0].grads[0], expected[0], 1e-15) << family;
    EXPECT_NEAR(ranks[1].grads[1], expected[1], 1e-15) << family;
  }
}

// A lowering bug (a tensor used or sent that nothing produced, one produced twice) is one clear
// error naming the message, not an empty tensor or one silently dropped.
TEST(RankPasses, AMissingOrDuplicateTensorIsALoweringBug) {
  const Schedule s = generate({"1f1b", 2, 2});
  const ToyModel model = ToyModel::make(2, 2);
  ToyRank rank(model, s.placement, 1);
  RankPasses<double> passes(rank, s.placement);
  const std::uint64_t f00 = message_name({Op::F, 0, 0});
  try {
    passes.run({Op::F, 1, 0});  // F1.0 needs F0.0, never received
    ADD_FAILURE() << "expected a logic error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("F0.0"), std::string::npos) << e.what();
  }
  passes.put(f00, 0.5);
  try {
    passes.put(f00, 0.25);
    ADD_FAILURE() << "expected a logic error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("a second tensor of F0.0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(passes.take(f00), 0.5);  // the first one is kept
  EXPECT_THROW(passes.take(f00), std::logic_error);
  EXPECT_THROW(passes.take(message_name({Op::B, 1, 1})), std::logic_error);
}

TEST(CpuExecutor, AFailingRankStopsTheStepWithItsMessage) {
  const Schedule s = generate({"1f1b", 4, 8});
  try {
    run_toy(s, ToyModel::make(4, 8), {.watchdog_seconds = 5}, 2);
    ADD_FAILURE() << "expected an error";
  } catch (const ExecutionError& e) {
    EXPECT_NE(std::string(e.what()).find("toy failure on rank 2"), std::string::npos) << e.what();
  }
}

// In a child process: an address-space limit a little above what is mapped leaves room for a
// few 8 MiB thread stacks, not for 64. Before the fix the ranks that had started waited in the
// start latch for the one that never did, forever. Exit code 0: the step failed with the
// environment's error.
// Unused in sanitizer builds, which cannot run under an address-space limit.
[[noreturn, maybe_unused]] void run_64_ranks_under_a_tight_address_limit() {
  alarm(30);  // a hang kills the child, and the test fails instead of stalling
  const Schedule s = generate({"1f1b", 64, 64});
  const ToyModel model = ToyModel::make(64, 64);
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  const rlim_t mapped = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
  const rlimit limit{mapped + (rlim_t{32} << 20), mapped + (rlim_t{32} << 20)};
  if (pages == 0 || setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(4);
  try {
    run_toy(s, model, {.watchdog_seconds = 10});
    std::_Exit(1);  // every thread started: the limit did not bite
  } catch (const EnvironmentError& e) {
    const bool named =
        std::string(e.what()).find("cannot start the thread of rank") != std::string::npos;
    std::_Exit(named ? 0 : 2);
  } catch (...) {
    std::_Exit(3);
  }
}

TEST(CpuExecutor, ARankThreadTheSystemRefusesFailsTheStepWithoutHanging) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers reserve address space that the limit would refuse them";
#else
  EXPECT_EXIT(run_64_ranks_under_a_tight_address_limit(), ::testing::ExitedWithCode(0), "");
#endif
}

}  // namespace
}  // namespace ppbench
