// The calibration benchmarks that every CPU benchmark program runs beside its own (make perf-ci,
// docs/perf-ci.md), and the quick mode's rule for how long a benchmark runs.
//
// BM_Calibration/compute: a fixed chain of 2^21 dependent multiply-xorshift steps on one 64-bit
//     integer: no memory, no vector unit, nothing a compiler can shorten; its time follows the
//     core's clock and how much of the core this process gets.
// BM_Calibration/memory: a sum over 64 MiB, more than the last-level cache of common CPUs: the
//     memory bandwidth this process gets. Its `bytes_per_second` is per second of wall time.
// scripts/compare_perf.py divides every benchmark's time by its run's calibration time, the
// median over the repetitions, and the baseline's likewise, so a machine that is uniformly
// slower or busier than the baseline's does not show as a regression. make perf-ci divides by
// the geometric mean of both benchmarks (PERF_CI_CALIBRATION ?= compute,memory): on a shared
// machine the schedule benchmarks, allocation- and pointer-heavy, followed the memory bandwidth
// the neighbours left as much as the core's clock (docs/perf-ci.md, "Thresholds and noise").
// compare_perf.py run by hand divides by the compute one alone unless --calibration says
// otherwise. The workloads must never change: a change moves every normalised figure (then
// refresh every baseline, `make perf-ci-baseline`).
//
// Quick mode: Google Benchmark lets a benchmark's own MinTime, Repetitions or Iterations win
// over --benchmark_min_time and --benchmark_repetitions. The programs set theirs through
// default_min_time / default_repetitions / default_iterations below, which step aside when the
// command line gives the flag, so `make perf-ci` decides the run length of every benchmark it
// selects; a run without the flags (make perf, make perf-cpu) is unchanged.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include <benchmark/benchmark.h>

namespace ppbench::bench {

namespace {

bool min_time_given = false;
bool repetitions_given = false;

bool has_flag(int argc, char** argv, const char* flag) {
  const std::size_t n = std::strlen(flag);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], flag, n) == 0 && (argv[i][n] == '=' || argv[i][n] == '\0'))
      return true;
  return false;
}

constexpr int kComputeSteps = 1 << 21;
constexpr std::size_t kMemoryBytes = std::size_t{64} << 20;

void BM_CalibrationCompute(benchmark::State& state) {
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (auto _ : state) {
    benchmark::DoNotOptimize(x);  // the chain restarts from an opaque value every iteration
    for (int i = 0; i < kComputeSteps; ++i) {
      x ^= x >> 29;
      x *= 0xbf58476d1ce4e5b9ULL;
    }
    benchmark::DoNotOptimize(x);
  }
  state.counters["steps"] = kComputeSteps;
}

void BM_CalibrationMemory(benchmark::State& state) {
  // Allocated and written once per process (Google Benchmark calls this function for every
  // repetition and every trial run), so the pages are faulted in outside the measured time.
  static const std::vector<std::uint64_t> data = [] {
    std::vector<std::uint64_t> v(kMemoryBytes / sizeof(std::uint64_t));
    std::iota(v.begin(), v.end(), std::uint64_t{1});
    return v;
  }();
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(data.data());
    benchmark::ClobberMemory();  // the sum is read from memory again every iteration
    std::uint64_t sum = 0;
    for (const std::uint64_t v : data) sum += v;
    benchmark::DoNotOptimize(sum);
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Over wall time, not SetBytesProcessed: Google Benchmark divides that by the benchmark's own
  // time, here this thread's CPU time, which leaves out the time slices other processes took,
  // so on a shared machine it claimed up to 2.7x the bandwidth the loop got.
  state.counters["bytes_per_second"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(kMemoryBytes) / wall_s,
      benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}

}  // namespace

// Call before benchmark::Initialize, which removes the flags it knows from argv.
void read_run_flags(int argc, char** argv) {
  min_time_given = has_flag(argc, argv, "--benchmark_min_time");
  repetitions_given = has_flag(argc, argv, "--benchmark_repetitions");
}

benchmark::internal::Benchmark* default_min_time(benchmark::internal::Benchmark* b,
                                                 double seconds) {
  return min_time_given ? b : b->MinTime(seconds);
}

benchmark::internal::Benchmark* default_iterations(benchmark::internal::Benchmark* b,
                                                   benchmark::IterationCount n) {
  return min_time_given ? b : b->Iterations(n);
}

benchmark::internal::Benchmark* default_repetitions(benchmark::internal::Benchmark* b, int n) {
  return repetitions_given ? b : b->Repetitions(n)->DisplayAggregatesOnly(true);
}

// Registered first by every program, so a run without interleaving starts with them.
void register_calibration() {
  default_min_time(benchmark::RegisterBenchmark("BM_Calibration/compute", BM_CalibrationCompute),
                   0.1)
      ->Unit(benchmark::kMicrosecond);
  default_min_time(benchmark::RegisterBenchmark("BM_Calibration/memory", BM_CalibrationMemory), 0.1)
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace ppbench::bench
