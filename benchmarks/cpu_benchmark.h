// What every CPU benchmark program shares beside the context (bench_context.h): the functions of
// benchmarks/calibration.cpp, linked into each, and the main() around them.
#pragma once

#include <functional>

#include <benchmark/benchmark.h>

#include "bench_context.h"

// Defined in benchmarks/calibration.cpp: the calibration benchmarks that scripts/compare_perf.py
// normalises by, and the run lengths that step aside for --benchmark_min_time /
// --benchmark_repetitions on the command line (make perf-ci's quick mode).
namespace ppbench::bench {
void read_run_flags(int argc, char** argv);
void register_calibration();
benchmark::internal::Benchmark* default_min_time(benchmark::internal::Benchmark* b, double seconds);
benchmark::internal::Benchmark* default_iterations(benchmark::internal::Benchmark* b,
                                                   benchmark::IterationCount n);
benchmark::internal::Benchmark* default_repetitions(benchmark::internal::Benchmark* b, int n);

// A CPU benchmark program's main: the quick mode's flags (read before Google Benchmark removes
// its own from argv), the context, the calibration benchmarks first, then the program's own,
// which `register_benchmarks` registers (and adds its own context lines), and the run. Returns
// main's exit status: 1 for an argument Google Benchmark does not know.
inline int run_cpu_benchmarks(int argc, char** argv,
                              const std::function<void()>& register_benchmarks) {
  read_run_flags(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  add_benchmark_context();
  register_calibration();
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace ppbench::bench
