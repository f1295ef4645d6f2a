// The simulator's fidelity on real runs: for every schedule on a small
// Llama-shaped transformer, the bubble_fraction measured on CPU threads beside
// the one predicted by replaying the step's own measured per-op costs, for D
// up to the number of cores (more ranks than cores time-share and measure the
// OS scheduler, not the schedule). Goal: within 3 percentage points.
#include <algorithm>
#include <cmath>
#include <thread>

#include <benchmark/benchmark.h>

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

}  // namespace

int main(int argc, char** argv) {
  return ppbench::bench::run_cpu_benchmarks(argc, argv, [] {
    const int cores = std::max(1u, std::thread::hardware_concurrency());
    for (const auto& info : ppbench::all_schedules())
      for (int d = 2; d <= std::min(cores, 4); d *= 2) {
        ppbench::ScheduleParams p{std::string(info.name), d, 8, info.uses_chunks ? 2 : 0, 0};
        auto* b = benchmark::RegisterBenchmark(
            ("BM_Fidelity/" + p.name + "/D" + std::to_string(d) + "/N8").c_str(), BM_Fidelity, p);
        // A quick run (--benchmark_min_time given) lets Google Benchmark choose: one step each.
        ppbench::bench::default_iterations(b, 3)->UseManualTime()->Unit(benchmark::kMillisecond);
      }
  });
}
