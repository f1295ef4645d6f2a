// The optimizer step's speed on the CPU against the machine's memory bandwidth, measured in the
// same run (the goal: AdamW at >= 80 % of the bandwidth bound).
//
// AdamW and SGD touch every element once and do little arithmetic per byte, so their bound is
// memory bandwidth: bytes moved / bandwidth. Bytes moved per element (what must cross the memory
// bus at least once, as STREAM counts them; write-allocate traffic not counted):
//   AdamW: read p, g, m, v; write p, m, v      -> 7 x sizeof(T)
//   SGD:   read p, g; write p                   -> 3 x sizeof(T)
//   STREAM triad a = b + s c: read b, c; write a -> 3 x sizeof(T)
// The triad is first timed alone, 20 times per dtype before any benchmark (its best bandwidth is
// the bound each optimizer row divides by, counter `of_stream`, and is in the context); the
// BM_StreamTriad rows show it again under Google Benchmark's timing. SGD reads p before it writes
// it, so it needs no write-allocate read and can pass the triad's figure (of_stream > 1). Arrays of
// 2^24 elements (64 MiB in f32), far beyond the caches; one thread, as one rank updates its own
// stages.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <benchmark/benchmark.h>

#include "cpu_benchmark.h"
#include "workloads/cpu/optimizer.h"
#include "workloads/cpu/tensor.h"

namespace {

constexpr std::size_t kElements = std::size_t{1} << 24;
double g_stream_bytes_per_s[2] = {0, 0};  // best triad bandwidth, [float, double]

template <typename T>
constexpr int slot() {
  return sizeof(T) == sizeof(double) ? 1 : 0;
}

// Bytes per second over the loop's own wall time, and that bandwidth over the triad's.
// `bytes_per_second` is that wall-time rate too, not SetBytesProcessed's: Google Benchmark divides
// that by the benchmark's own time, here this thread's CPU time, which leaves out the time slices
// other processes took, so on a shared machine it claimed up to 2.7x the bandwidth the loop got.
template <typename T>
void report(benchmark::State& state, double bytes_per_iteration, double seconds, bool is_stream) {
  const double rate =
      seconds > 0 ? bytes_per_iteration * static_cast<double>(state.iterations()) / seconds : 0;
  state.counters["bytes_per_second"] =
      benchmark::Counter(rate, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
  state.counters["GBps"] = rate / 1e9;
  const double bound = g_stream_bytes_per_s[slot<T>()];
  if (!is_stream && bound > 0) state.counters["of_stream"] = rate / bound;
}

// Wall time of `body` summed over the benchmark's iterations.
template <class Body>
double timed_loop(benchmark::State& state, Body body) {
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    benchmark::ClobberMemory();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return seconds;
}

// STREAM's triad a = b + s c over kElements, its arrays allocated once.
template <typename T>
struct Triad {
  ppbench::cpu::AlignedVector<T> a = ppbench::cpu::AlignedVector<T>(kElements, T(0));
  ppbench::cpu::AlignedVector<T> b = ppbench::cpu::AlignedVector<T>(kElements, T(1));
  ppbench::cpu::AlignedVector<T> c = ppbench::cpu::AlignedVector<T>(kElements, T(2));
  static constexpr double kBytes = 3.0 * sizeof(T) * kElements;

  void operator()() {
    using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
    Eigen::Map<Array>(a.data(), kElements) = Eigen::Map<const Array>(b.data(), kElements) +
                                             T(0.5) * Eigen::Map<const Array>(c.data(), kElements);
    benchmark::DoNotOptimize(a.data());
  }
};

template <typename T>
void BM_StreamTriad(benchmark::State& state) {
  Triad<T> triad;
  report<T>(state, Triad<T>::kBytes, timed_loop(state, triad), true);
}

template <typename T>
void BM_AdamW(benchmark::State& state) {
  ppbench::cpu::AlignedVector<T> p(kElements, T(1)), g(kElements, T(0.01)), m(kElements, T(0)),
      v(kElements, T(0));
  long t = 0;
  const double s = timed_loop(state, [&] {
    ppbench::cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), kElements,
                               {1e-3, 0.01, 0.9, 0.999, 1e-8, ++t});
  });
  report<T>(state, 7.0 * sizeof(T) * kElements, s, false);
}

template <typename T>
void BM_Sgd(benchmark::State& state) {
  ppbench::cpu::AlignedVector<T> p(kElements, T(1)), g(kElements, T(0.01));
  const double s =
      timed_loop(state, [&] { ppbench::cpu::sgd_update(p.data(), g.data(), kElements, 1e-3); });
  report<T>(state, 3.0 * sizeof(T) * kElements, s, false);
}

void register_benchmarks() {
  benchmark::AddCustomContext("eigen_simd", Eigen::SimdInstructionSetsInUse());
  // The triad first, once per dtype, outside Google Benchmark's loop: its bandwidth must be known
  // before the optimizer rows report against it.
  auto measure_triad = [](auto zero) {
    using T = decltype(zero);
    Triad<T> triad;
    double best = 0;
    for (int k = 0; k < 20; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      triad();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, Triad<T>::kBytes / s);
    }
    g_stream_bytes_per_s[slot<T>()] = best;
    benchmark::AddCustomContext(
        std::string("stream_triad_best_GBps_") + (slot<T>() ? "f64" : "f32"),
        std::to_string(best / 1e9));
  };
  measure_triad(0.0f);
  measure_triad(0.0);
  benchmark::RegisterBenchmark("BM_StreamTriad/f32", BM_StreamTriad<float>);
  benchmark::RegisterBenchmark("BM_StreamTriad/f64", BM_StreamTriad<double>);
  benchmark::RegisterBenchmark("BM_AdamW/f32", BM_AdamW<float>);
  benchmark::RegisterBenchmark("BM_AdamW/f64", BM_AdamW<double>);
  benchmark::RegisterBenchmark("BM_Sgd/f32", BM_Sgd<float>);
  benchmark::RegisterBenchmark("BM_Sgd/f64", BM_Sgd<double>);
}

}  // namespace

int main(int argc, char** argv) {
  return ppbench::bench::run_cpu_benchmarks(argc, argv, register_benchmarks);
}
