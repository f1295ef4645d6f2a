// GEMM TFLOP/s of each workload's shapes on the GPU, beside a large square bf16 cuBLASLt GEMM
// measured in the same run (issue 4, item 6).
//
// BM_SquarePeak/<n>: C = A B, n x n x n, bf16 in and out, f32 accumulation, through the same
// ppbench::cuda::gemm (cuBLASLt, heuristic algorithm, 32 MiB workspace) the layers use. The best
// of these is the "peak" each shape row divides by (counter `of_peak`); they are registered first
// so they run first.
//
// BM_Gemm/<workload>/<op>/<pass>/<dtype>: the GEMM of one layer pass with the shapes below, in the
// orientation the layer issues it: F  y = x W^T [m, n, k]; I  dx = dy W [m, k, n];
// W  dW += dy^T x [n, k, m] into f32. FLOPs = 2 m n k.
//
// Shapes (from the workload presets; micro-batch sizes chosen as typical pipeline micro-batches):
//   mlp        width 1024 (MlpConfig's default), 256 rows per micro-batch
//   amoebanet  D = 256 filters, 8 images at 56 x 56: the 1x1 conv c -> c and the bottleneck 3x3
//              on c/4 (im2col K = 9 c/4), as GEMMs of N*H*W rows
//   llama3-8b  hidden 4096, 32 q / 8 kv heads of 128, ffn 14336, vocab 128256, seq 4096, mb 1
//
// Timing: CUDA events around a span of back-to-back launches of the GEMM (manual time, the
// span's time over its launches), so the figure is device time. Each span waits on the GPU
// (enqueue_delay) until the host has queued all of its launches: around a single short GEMM
// (a 256 x 1024 x 1024 one takes about 2 us) the events would also hold the host's time to
// launch it, 3 to 8 us with the GPU idle. A span holds enough launches for about 200 us; a row
// times 30 spans (kSpans).
// Without a visible GPU the program prints why and exits 0 without running anything.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include "bench_context.h"
#include "harness/cuda/link_delay.h"
#include "workloads/cuda/init_fill.h"
#include "workloads/cuda/kernels.h"

namespace {

using ppbench::cuda::Context;
using ppbench::cuda::DeviceArena;
using ppbench::cuda::DTensor;
using ppbench::cuda::DType;

struct Gpu {
  std::unique_ptr<DeviceArena> arena;
  std::unique_ptr<Context> ctx;
  cudaEvent_t start = nullptr, stop = nullptr;
};
Gpu& gpu() {
  static Gpu g = [] {
    Gpu x;
    x.arena = std::make_unique<DeviceArena>("cuda_gemm_bench", std::size_t{8} << 30);
    x.ctx = std::make_unique<Context>(*x.arena);
    CUDA_CHECK(cudaEventCreate(&x.start));
    CUDA_CHECK(cudaEventCreate(&x.stop));
    return x;
  }();
  return g;
}

double& peak_tflops() {
  static double p = 0;
  return p;
}

// Times C = op(A) op(B) with [m, n, k] as gemm() takes them. A and B hold uniform values in
// [-1, 1) drawn on the device, as the layers' data are: a Hopper GPU runs a large GEMM on zeros
// at a higher clock (less power switching bits), which would raise the peak that the layers'
// MFU divides by.
void run_gemm(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, bool ta,
              bool tb, DType ab, DType c_type, float beta) {
  try {
    Gpu& g = gpu();
    DTensor a(*g.arena, {m, k}, ab, "A"), b(*g.arena, {k, n}, ab, "B"),
        c(*g.arena, {m, n}, c_type, "C");
    ppbench::cuda::fill_features(a, ppbench::data_keys(1, 0));
    ppbench::cuda::fill_features(b, ppbench::data_keys(1, 1));
    ppbench::cuda::zero(c);
    auto once = [&] {
      ppbench::cuda::gemm(*g.ctx, m, n, k, a.data(), ta, b.data(), tb, ab, c.data(), c_type, 1.0f,
                          beta);
    };
    once();  // algorithm choice and warm-up outside the timing
    CUDA_CHECK(cudaDeviceSynchronize());
    // Device seconds per launch of a span of `launches`, the span queued behind a wait long
    // enough for the host to launch them all (10 us each, more than a cuBLASLt launch takes).
    const auto span = [&](int launches) {
      ppbench::cuda::enqueue_delay(g.ctx->stream, 50e-6 + 10e-6 * launches);
      CUDA_CHECK(cudaEventRecord(g.start, g.ctx->stream));
      for (int i = 0; i < launches; ++i) once();
      CUDA_CHECK(cudaEventRecord(g.stop, g.ctx->stream));
      CUDA_CHECK(cudaEventSynchronize(g.stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, g.start, g.stop));
      return ms * 1e-3 / launches;
    };
    const double one = span(1);
    const int launches = static_cast<int>(std::clamp(std::ceil(200e-6 / one), 1.0, 256.0));
    double total_s = 0;
    for (auto _ : state) {
      const double s = span(launches);
      state.SetIterationTime(s);
      total_s += s;
    }
    // From the event times themselves: Google Benchmark's rate counters divide by host CPU time.
    const double flops =
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    state.counters["TFLOP/s"] =
        total_s > 0 ? flops * static_cast<double>(state.iterations()) / total_s * 1e-12 : 0.0;
    state.counters["launches_per_span"] = launches;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["m"] = static_cast<double>(m);
  state.counters["n"] = static_cast<double>(n);
  state.counters["k"] = static_cast<double>(k);
}

// Timed spans per row, each about 200 us or one GEMM, whichever is longer: a fixed count, as
// Google Benchmark's search for one (0.5 s of measured time) would spend seconds of waits on
// each short GEMM's row.
constexpr int kSpans = 30;

// Every row: the spans' own device time, kSpans of them.
void timed_in_spans(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Iterations(kSpans)->Unit(benchmark::kMicrosecond);
}

struct Shape3 {
  const char* workload;
  const char* op;
  std::int64_t m, n, k;  // F: y[m, n] = x[m, k] W[n, k]^T
};

const Shape3 kShapes[] = {
    {"mlp", "linear1024", 256, 1024, 1024},
    {"amoebanet", "conv1x1_256", 8 * 56 * 56, 256, 256},
    {"amoebanet", "conv3x3_64", 8 * 56 * 56, 64, 9 * 64},
    {"llama3-8b", "qkv", 4096, 6144, 4096},
    {"llama3-8b", "o_proj", 4096, 4096, 4096},
    {"llama3-8b", "gate_up", 4096, 2 * 14336, 4096},
    {"llama3-8b", "down", 4096, 4096, 14336},
    {"llama3-8b", "lm_head", 4096, 128256, 4096},
};

// The console output gains `of_peak` (TFLOP/s over the best square figure so far, the squares
// running first); the JSON file has TFLOP/s and the square rows to divide by.
class PeakReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> out = runs;
    for (Run& r : out) {
      auto it = r.counters.find("TFLOP/s");
      if (it == r.counters.end() || r.iterations == 0 || r.error_occurred) continue;
      const double tflops = it->second.value;
      if (r.run_name.function_name.rfind("BM_SquarePeak", 0) == 0)
        peak_tflops() = std::max(peak_tflops(), tflops);
      else if (peak_tflops() > 0)
        r.counters["of_peak"] = tflops / peak_tflops();
    }
    ConsoleReporter::ReportRuns(out);
  }
};

}  // namespace

int main(int argc, char** argv) {
  ppbench::line_buffered_output();
  std::string why;
  if (!ppbench::cuda::has_gpu(&why)) {
    std::printf("cuda_gemm_bench: skipped, no CUDA device visible (%s)\n", why.c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  ppbench::add_benchmark_context();
  benchmark::AddCustomContext("gpu", ppbench::cuda::device_info_text());
  benchmark::AddCustomContext("cublas", ppbench::cuda::cublas_version_text());
  benchmark::AddCustomContext("inputs", "A and B uniform in [-1, 1), C zeroed");
  for (std::int64_t n : {4096, 8192, 16384}) {
    benchmark::RegisterBenchmark(("BM_SquarePeak/bf16/" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& s) {
                                   run_gemm(s, n, n, n, false, false, DType::kBF16, DType::kBF16,
                                            0.0f);
                                 })
        ->Apply(timed_in_spans);
  }
  for (const Shape3& sh : kShapes) {
    for (DType t : {DType::kBF16, DType::kF32}) {
      const std::string base = std::string("BM_Gemm/") + sh.workload + "/" + sh.op + "/";
      const std::string dt = "/" + ppbench::cuda::dtype_name(t);
      const Shape3 s = sh;
      benchmark::RegisterBenchmark((base + "F" + dt).c_str(), [s, t](benchmark::State& st) {
        run_gemm(st, s.m, s.n, s.k, false, true, t, t, 0.0f);
      })->Apply(timed_in_spans);
      benchmark::RegisterBenchmark((base + "I" + dt).c_str(), [s, t](benchmark::State& st) {
        run_gemm(st, s.m, s.k, s.n, false, false, t, t, 0.0f);
      })->Apply(timed_in_spans);
      benchmark::RegisterBenchmark((base + "W" + dt).c_str(), [s, t](benchmark::State& st) {
        run_gemm(st, s.n, s.k, s.m, true, false, t, DType::kF32, 1.0f);
      })->Apply(timed_in_spans);
    }
  }
  PeakReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
