// How fast ppbench turns schedule parameters into metrics, in actions per second.
//
// BM_Pipeline/<family>/D<D>/N<N>: generate + validate + simulate + metrics, the
// path every `ppbench run` and sweep point takes, for every family in the
// registry, sized from ~1e2 to ~1e7 actions so that the time per action shows
// whether the pipeline is linear. D64/N1024 is the headline point of the issue
// (target: >= 5 million actions/s on one core).
//
// BM_Phase/<phase>/<family>/D64/N1024: each phase alone (validate split further
// into its lowering and deadlock check), so a regression can be located.
//
// A family whose generator throws (not implemented, or parameters it rejects)
// is reported with SkipWithError rather than stopping the run. The JSON context
// gets the CPU model and the build type (see results/perf/README.md).
#include <algorithm>
#include <cmath>
#include <exception>
#include <fstream>
#include <set>
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>

#include "cpu_benchmark.h"
#include "harness/cost_model.h"
#include "harness/metrics.h"
#include "harness/simulator.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace {

using namespace ppbench;

constexpr int kChunks = 2;  // interleaved-1f1b's v in every point
constexpr int kHeadlineD = 64, kHeadlineN = 1024;

// Nominal actions per (D x N), only used to size the sweep so that each family
// lands near each decade; the exact count comes from Schedule::action_count().
// A fixed table (rather than probing the generator) keeps benchmark names
// stable between runs, which compare_perf.py matches on.
double actions_per_dn(std::string_view family) {
  if (family == "interleaved-1f1b") return 2.0 * kChunks;  // F, B on v stages per rank
  if (family == "zb-h1" || family == "zb-h2") return 3;    // F, I, W
  if (family == "zb-v" || family == "v-half" || family == "v-min")
    return 6;                           // F, I, W on 2 stages per rank
  if (family == "dualpipev") return 4;  // 2 stages per rank, pairs merge
  return 2;                             // F, B
}

// N a multiple of D and >= 2D satisfies every family's constraints in the
// registry (N >= D, N >= 2D, N >= 2D-1, N even with D even, N a multiple of D).
int microbatches_for(double target_actions, int d, std::string_view family) {
  const double k = target_actions / (actions_per_dn(family) * d * d);
  return static_cast<int>(std::max(2L, std::lround(k))) * d;
}

ScheduleParams params_for(const ScheduleInfo& info, int d, int n) {
  ScheduleParams p;
  p.name = std::string(info.name);
  p.devices = d;
  p.microbatches = n;
  if (info.uses_chunks) p.chunks = kChunks;
  return p;
}

std::string point_name(const ScheduleParams& p) {
  std::string name =
      p.name + "/D" + std::to_string(p.devices) + "/N" + std::to_string(p.microbatches);
  if (p.chunks > 0) name += "/v" + std::to_string(p.chunks);
  return name;
}

CostModel costs_for(const Schedule& s) { return CostModel::uniform(s.stages(), StageCost{}); }

void set_counters(benchmark::State& state, const ScheduleParams& p, std::size_t actions) {
  const auto a = static_cast<double>(actions);
  // Per iteration, so the rate is over all iterations of the measured time.
  state.counters["actions_per_second"] =
      benchmark::Counter(a, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["actions"] = a;
  state.counters["devices"] = p.devices;
  state.counters["microbatches"] = p.microbatches;
}

void BM_Pipeline(benchmark::State& state, const ScheduleParams& p) {
  std::size_t actions = 0;
  for (auto _ : state) {
    try {
      const Schedule s = generate(p);
      validate(s);
      const Trace t = simulate(s, costs_for(s), {.record_comm = false});
      const Metrics m = compute_metrics(t, s.placement);
      benchmark::DoNotOptimize(m.makespan);
      actions = s.action_count();
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      break;  // the library asks us to leave the loop after an error
    }
  }
  set_counters(state, p, actions);
}

enum class Phase { Generate, Validate, Lower, DeadlockCheck, Simulate, Metrics };

const char* phase_name(Phase ph) {
  switch (ph) {
    case Phase::Generate:
      return "generate";
    case Phase::Validate:
      return "validate";
    case Phase::Lower:
      return "lower";
    case Phase::DeadlockCheck:
      return "deadlock_check";
    case Phase::Simulate:
      return "simulate";
    case Phase::Metrics:
      return "metrics";
  }
  return "?";
}

// One phase alone; what it needs from the earlier phases is built untimed.
void BM_Phase(benchmark::State& state, Phase ph, const ScheduleParams& p) {
  Schedule s;
  Program program;
  Trace trace;
  try {
    s = generate(p);
    if (ph == Phase::DeadlockCheck) program = lower(s);
    if (ph == Phase::Metrics) trace = simulate(s, costs_for(s), {.record_comm = false});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const CostModel costs = costs_for(s);
  for (auto _ : state) {
    switch (ph) {
      case Phase::Generate:
        benchmark::DoNotOptimize(generate(p));
        break;
      case Phase::Validate:
        validate(s);
        break;
      case Phase::Lower:
        benchmark::DoNotOptimize(lower(s));
        break;
      case Phase::DeadlockCheck:
        check_deadlock_free(s, program);
        break;
      case Phase::Simulate:
        benchmark::DoNotOptimize(simulate(s, costs, {.record_comm = false}));
        break;
      case Phase::Metrics:
        benchmark::DoNotOptimize(compute_metrics(trace, s.placement));
        break;
    }
  }
  set_counters(state, p, s.action_count());
}

// Timing by size, to keep the whole program near a minute on one core: small
// points repeat for a while in microseconds; the larger ones run a fixed count
// (the ~1e7 points once, a few seconds each), in wall time, which includes the
// page faults of their first-touch memory.
void size_options(benchmark::internal::Benchmark* b, double nominal_actions) {
  if (nominal_actions >= 5e6) {
    b->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
  } else if (nominal_actions >= 5e5) {
    b->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();
  } else {
    bench::default_min_time(b, 0.1)->Unit(benchmark::kMicrosecond);
  }
}

void register_benchmarks() {
  // Decades of actions and the pipeline depth used for each.
  struct Decade {
    double actions;
    int devices;
  };
  constexpr Decade kSweep[] = {{1e2, 4}, {1e3, 8}, {1e4, 16}, {1e5, 32}, {1e6, 64}, {1e7, 64}};

  for (const ScheduleInfo& info : all_schedules()) {
    std::set<std::pair<int, int>> points;  // (D, N), deduplicated with the headline
    points.insert({kHeadlineD, kHeadlineN});
    for (const Decade& d : kSweep)
      points.insert({d.devices, microbatches_for(d.actions, d.devices, info.name)});
    for (const auto& [d, n] : points) {
      const ScheduleParams p = params_for(info, d, n);
      auto* b =
          benchmark::RegisterBenchmark(("BM_Pipeline/" + point_name(p)).c_str(), BM_Pipeline, p);
      size_options(b, actions_per_dn(info.name) * d * n);
    }
  }

  // Each phase alone at the headline point, for one family with a full B and
  // one with split I/W on a V placement.
  for (std::string_view family : {"1f1b", "zb-v"}) {
    const ScheduleParams p = params_for(find_schedule(family), kHeadlineD, kHeadlineN);
    for (Phase ph : {Phase::Generate, Phase::Validate, Phase::Lower, Phase::DeadlockCheck,
                     Phase::Simulate, Phase::Metrics}) {
      const std::string name = std::string("BM_Phase/") + phase_name(ph) + "/" + point_name(p);
      bench::default_min_time(benchmark::RegisterBenchmark(name.c_str(), BM_Phase, ph, p), 0.1)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return ppbench::bench::run_cpu_benchmarks(argc, argv, register_benchmarks);
}
