// What the CPU executor itself costs per action, measured with work that does nothing
// (issue 3, item 8: goal under 5 us per action).
//
// BM_Executor/<family>/D<D>/N<N>[/v2]: one CpuExecutor::run_step() per iteration, wall clock,
// on a StageWork<int> whose F, B, I and W return at once. Everything measured is therefore the
// executor: spawning and joining one thread per rank, the in-process transport (a mutex and a
// condition variable per send and receive, and the wake-up of the peer that waits), the ready
// map, two clock reads and an activation sample per compute action, and merging the Trace.
//
// Counters:
//   us_per_rank_action = wall x D / actions. THE overhead per action: each rank runs its
//       ~actions / D actions one after another while the ranks run in parallel, so this is how
//       much every action lengthens its rank's timeline, which is what a real step pays on top
//       of the work (the 5 us goal). It includes waiting for the peer's hand-over on the
//       dependency chain. With empty work that is an upper bound: the producer is never more
//       than one hand-over ahead, so almost every receive waits for a wake-up (handoff_us);
//       with real work most receives find their tensor already sent during the previous
//       compute and cost a lock, and the figure falls towards compute_us plus that lock.
//   us_per_action = wall / actions: the aggregate throughput view (D ranks' actions share the
//       wall clock); smaller by D when the ranks really run in parallel.
//   With D above the number of cores (this 2-core machine at D = 4) the ranks' threads
//   time-share, so us_per_rank_action is inflated by up to D / cores and us_per_action is the
//   fairer figure; the counter `oversubscribed` is 1 on those rows.
//   actions: compute actions (Schedule::action_count; DualPipe's overlapped F&B pair is one);
//   sends: tensors sent (each also one receive), from the lowered program;
//   compute_us: mean time inside a compute action (clock reads, ready map, the virtual calls,
//       activation sample); handoff_us: mean time from both sides being ready to the tensor
//       being in the receiver's hand (the transport's latency); both from untimed extra steps.
//   spawn_us: median cost of starting and joining D threads (BM_ThreadSpawn), the fixed part of
//       every run_step; us_per_rank_action_steady = (wall - spawn) x D / actions, the per-action
//       figure without it, which is what a long step (large N) tends to.
// BM_ThreadSpawn/D<D>: spawning, starting (latch) and joining D threads alone.
#include <algorithm>
#include <chrono>
#include <exception>
#include <fstream>
#include <latch>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/cpu_cores.h"
#include "cpu_benchmark.h"
#include "harness/executor/cpu_executor.h"
#include "schedules/lower.h"
#include "schedules/registry.h"

namespace {

using namespace ppbench;
using Clock = std::chrono::steady_clock;

// Passes that do nothing but hand the (tiny) payload on, so only the executor is measured.
class EmptyWork final : public StageWork<int> {
 public:
  int forward(int, int, int input) override { return input; }
  int backward(int, int, int grad_output, bool) override { return grad_output; }
  void backward_weight(int, int) override {}
  std::size_t saved_bytes(int) const override { return 0; }
};

bool oversubscribed(int devices) { return devices > ppbench::available_cores(); }

// The part of run_step that does not depend on the schedule: D threads started together
// (as run_step's latch does), then joined.
void spawn_and_join(int devices) {
  std::latch start(devices + 1);
  std::vector<std::jthread> threads;
  threads.reserve(static_cast<std::size_t>(devices));
  for (int r = 0; r < devices; ++r) threads.emplace_back([&start] { start.arrive_and_wait(); });
  start.arrive_and_wait();
}

// Median of repeated spawn_and_join(D), once per D: the median resists the other processes of
// a shared machine better than the mean.
double spawn_seconds(int devices) {
  static std::map<int, double> cache;
  auto it = cache.find(devices);
  if (it != cache.end()) return it->second;
  std::vector<double> t(101);
  for (double& x : t) {
    const auto t0 = Clock::now();
    spawn_and_join(devices);
    x = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::nth_element(t.begin(), t.begin() + 50, t.end());
  return cache[devices] = t[50];
}

void BM_Executor(benchmark::State& state, const ScheduleParams& p) {
  Schedule s;
  try {
    s = generate(p);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  std::vector<EmptyWork> ranks(static_cast<std::size_t>(s.placement.ranks));
  std::vector<StageWork<int>*> work;
  for (EmptyWork& r : ranks) work.push_back(&r);
  CpuExecutor<int> executor(s, work, ExecutorOptions{});

  double wall = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    StepRecord record = executor.run_step();
    wall += std::chrono::duration<double>(Clock::now() - t0).count();
    benchmark::DoNotOptimize(record.trace.compute.data());
  }

  // The breakdown, from a few untimed steps (reading the Trace inside the loop would be timed).
  constexpr int kBreakdownSteps = 5;
  double compute_s = 0, handoff_s = 0;
  std::size_t compute_n = 0, handoff_n = 0;
  for (int i = 0; i < kBreakdownSteps; ++i) {
    const StepRecord record = executor.run_step();
    for (const ComputeEvent& e : record.trace.compute) compute_s += e.end - e.start;
    for (const CommEvent& e : record.trace.comm) handoff_s += e.end - e.start;
    compute_n += record.trace.compute.size();
    handoff_n += record.trace.comm.size();
  }
  std::size_t sends = 0;
  for (const auto& rank : lower(s).ranks)
    sends += static_cast<std::size_t>(std::count_if(
        rank.begin(), rank.end(), [](const Instr& in) { return in.kind == Instr::Kind::Send; }));

  const double actions = static_cast<double>(s.action_count());
  const double per_step = wall / static_cast<double>(state.iterations());
  state.counters["us_per_rank_action"] = 1e6 * per_step * p.devices / actions;
  state.counters["us_per_action"] = 1e6 * per_step / actions;
  const double spawn = spawn_seconds(p.devices);
  state.counters["spawn_us"] = 1e6 * spawn;
  state.counters["us_per_rank_action_steady"] =
      1e6 * std::max(0.0, per_step - spawn) * p.devices / actions;
  state.counters["actions"] = actions;
  state.counters["sends"] = static_cast<double>(sends);
  state.counters["compute_us"] = compute_n ? 1e6 * compute_s / static_cast<double>(compute_n) : 0;
  state.counters["handoff_us"] = handoff_n ? 1e6 * handoff_s / static_cast<double>(handoff_n) : 0;
  state.counters["devices"] = p.devices;
  state.counters["microbatches"] = p.microbatches;
  state.counters["oversubscribed"] = oversubscribed(p.devices) ? 1 : 0;
}

void BM_ThreadSpawn(benchmark::State& state, int devices) {
  for (auto _ : state) spawn_and_join(devices);
  state.counters["devices"] = devices;
  state.counters["oversubscribed"] = oversubscribed(devices) ? 1 : 0;
}

void register_benchmarks() {
  constexpr int kChunks = 2;  // interleaved-1f1b's v
  for (int d : {2, 4}) {
    auto* b = benchmark::RegisterBenchmark(("BM_ThreadSpawn/D" + std::to_string(d)).c_str(),
                                           BM_ThreadSpawn, d);
    bench::default_repetitions(bench::default_min_time(b->UseRealTime(), 0.1), 3)
        ->Unit(benchmark::kMicrosecond);
  }
  for (const char* family : {"1f1b", "gpipe", "zb-h1", "interleaved-1f1b", "dualpipe"})
    for (int d : {2, 4})
      for (int n : {8, 32, 128}) {
        ScheduleParams p;
        p.name = family;
        p.devices = d;
        p.microbatches = n;
        if (find_schedule(family).uses_chunks) p.chunks = kChunks;
        std::string name = std::string("BM_Executor/") + family + "/D" + std::to_string(d) + "/N" +
                           std::to_string(n);
        if (p.chunks > 0) name += "/v" + std::to_string(p.chunks);
        // Wall clock: the ranks' threads are what is measured, not this thread's CPU time.
        // Three repetitions, read by their median: on a shared machine a single stall of a rank
        // thread can multiply a short step's time (compare_perf.py also takes the median).
        auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Executor, p);
        bench::default_repetitions(bench::default_min_time(b->UseRealTime(), 0.2), 3)
            ->Unit(benchmark::kMicrosecond);
      }
}

}  // namespace

int main(int argc, char** argv) {
  return ppbench::bench::run_cpu_benchmarks(argc, argv, [] {
    const int cores = ppbench::available_cores();
    benchmark::AddCustomContext(
        "executor_threads_note",
        std::to_string(cores) +
            " cores to run on: rows with D above that oversubscribe (counter oversubscribed = 1); "
            "there us_per_rank_action is inflated by time-sharing and us_per_action is fairer");
    register_benchmarks();
  });
}
