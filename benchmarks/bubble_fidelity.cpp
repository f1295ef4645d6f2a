// The simulator's fidelity on real runs: for every schedule on a small
// Llama-shaped transformer, the bubble_fraction measured on CPU threads beside
// the one predicted by replaying the step's own measured per-op costs, for D
// up to the number of cores (more ranks than cores time-share and measure the
// OS scheduler, not the schedule). Goal: within 3 percentage points.
//
// The D it leaves out for want of cores (all of them on one core: a pipeline has
// at least 2 ranks) are named on stderr and in the JSON context
// (ppbench_not_registered), so a run there says why it has no BM_Fidelity rows,
// and scripts/compare_perf.py counts them as not run now and shows the reason.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <benchmark/benchmark.h>

#include "core/cpu_cores.h"
#include "core/error.h"
#include "cpu_benchmark.h"
#include "harness/backends/cpu/cpu_run.h"
#include "schedules/registry.h"
#include "workloads/transformer.h"

namespace {

ppbench::WorkloadSpec workload() {
  ppbench::TransformerConfig c = ppbench::transformer_preset("tiny-llama");
  c.layers = 8;
  c.hidden = 256;
  c.ffn = 688;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq = 128;
  c.vocab = 1024;
  return ppbench::build_transformer(c, 2, ppbench::DType::kF32);
}

void BM_Fidelity(benchmark::State& state, ppbench::ScheduleParams params) {
  static const ppbench::WorkloadSpec spec = workload();
  ppbench::RunOptions o;
  o.schedule = params;
  o.steps = 1;
  o.warmup = 1;
  double gap = 0, measured = 0, predicted = 0;
  for (auto _ : state) {
    ppbench::RunOutput out;
    try {
      out = ppbench::run_cpu(spec, o);
    } catch (const ppbench::UsageError& e) {
      state.SkipWithError(e.what());
      return;
    }
    measured = out.record["measured"]["bubble_fraction"];
    predicted = out.record["predicted"]["bubble_fraction"];
    gap = measured - predicted;
    state.SetIterationTime(out.record["step_time_s"].get<double>());
  }
  state.counters["measured_bubble"] = measured;
  state.counters["predicted_bubble"] = predicted;
  state.counters["gap_pp"] = 100 * gap;
  state.counters["within_3pp"] = std::abs(100 * gap) <= 3 ? 1 : 0;
}

constexpr int kMaxDevices = 4;

}  // namespace

int main(int argc, char** argv) {
  return ppbench::bench::run_cpu_benchmarks(argc, argv, [] {
    // The affinity mask, which a container or taskset may make smaller than the machine.
    const int cores = ppbench::available_cores();
    for (const auto& info : ppbench::all_schedules())
      for (int d = 2; d <= std::min(cores, kMaxDevices); d *= 2) {
        ppbench::ScheduleParams p{std::string(info.name), d, 8, info.uses_chunks ? 2 : 0, 0};
        auto* b = benchmark::RegisterBenchmark(
            ("BM_Fidelity/" + p.name + "/D" + std::to_string(d) + "/N8").c_str(), BM_Fidelity, p);
        // A quick run (--benchmark_min_time given) lets Google Benchmark choose: one step each.
        ppbench::bench::default_iterations(b, 3)->UseManualTime()->Unit(benchmark::kMillisecond);
      }
    std::string left_out;
    for (int d = 2; d <= kMaxDevices; d *= 2)
      if (d > cores) left_out += (left_out.empty() ? "D=" : ", D=") + std::to_string(d);
    if (left_out.empty()) return;
    const std::string why = "BM_Fidelity at " + left_out + ": " + std::to_string(cores) +
                            (cores == 1 ? " core" : " cores") +
                            " to run on, and D ranks on fewer than D cores time-share them, "
                            "which measures the OS scheduler, not the schedule";
    benchmark::AddCustomContext("ppbench_not_registered", why);
    std::fprintf(stderr, "bubble_fidelity: not registered: %s%s\n", why.c_str(),
                 cores < 2 ? " (only the calibration benchmarks run)" : "");
  });
}
