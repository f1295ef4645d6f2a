// GFLOP/s of each CPU layer's F, I and W pass, beside the GEMM peak of the kernels' own matrix
// product measured in the same run.
//
// BM_GemmPeak/<dtype>/<n>: C = A B with n x n x n, single-threaded, through the kernels' gemm()
// (OpenBLAS or Eigen, workloads/cpu/gemm.h; the context's `cpu_gemm` says which): what the
// machine's GEMM does at its best with this build.
//
// The "peak" every layer row divides by (counters `of_peak`, from wall time, and `cpu_of_peak`,
// from thread CPU time; see thread_cpu_seconds) is the same product at n = 1024, timed apart from
// the BM_GemmPeak rows: once per dtype and process, when the first layer row of that dtype sets
// up, outside any timed loop, the best of kPeakProducts products (see gemm_peak).
//
// BM_Layer/<layer>/<dtype>/<pass>: one pass of one layer on one micro-batch. Every iteration runs
// the layer's whole F, I, W (so each pass sees exactly the Saved its predecessor leaves, as in a
// pipeline step) and reports only the chosen pass's time through manual timing: the benchmark's
// time is one pass, and PauseTiming is never needed. Consequently a row takes about
// (F + I + W) / pass times its min_time of wall clock, and Google Benchmark's "CPU" column, which
// covers the whole loop body, is that of F + I + W: read `cpu_GFLOP/s` instead.
//
// FLOPs are counted analytically from the shapes, as 2 per multiply-add of the GEMMs the kernel
// executes (formulas beside each case below). Elementwise work (bias, GeLU, SiLU, norms, softmax,
// RoPE, im2col) is not counted: it is where a layer loses against the GEMM peak, which is what
// these rows are meant to show.
//
// Eigen stays single-threaded (EIGEN_DONT_PARALLELIZE, no OpenMP), as in the executor, where
// each rank is one thread. The context records the SIMD instruction sets Eigen compiled for:
// without -march flags that is SSE2 on x86-64, whatever the CPU offers.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <benchmark/benchmark.h>

#include "cpu_benchmark.h"
#include "workloads/cpu/gemm.h"
#include "workloads/cpu/kernels.h"

namespace {

using namespace ppbench::cpu;
using Clock = std::chrono::steady_clock;
using I64 = std::int64_t;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// On a shared machine the wall clock also counts the time other processes hold the core, so each
// figure is given twice: `GFLOP/s` from wall time (the benchmark's own time) and `cpu_GFLOP/s`
// from this thread's CPU time, which time-sharing does not inflate (cache and memory bandwidth
// shared with other processes still can).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall and CPU time of one instant.
struct Stamp {
  Clock::time_point wall;
  double cpu;
  static Stamp now() { return {Clock::now(), thread_cpu_seconds()}; }
};

// Sets GFLOP, GFLOP/s and cpu_GFLOP/s of `flops` per iteration over the summed pass times.
void set_flop_counters(benchmark::State& state, double flops, double wall_s, double cpu_s) {
  const double total = flops * static_cast<double>(state.iterations()) / 1e9;
  state.counters["GFLOP"] = flops / 1e9;
  state.counters["GFLOP/s"] = total / wall_s;
  state.counters["cpu_GFLOP/s"] = total / cpu_s;
}

// ---- the kernels' GEMM peak -------------------------------------------------------------------

// One figure twice: by the wall clock and by this thread's CPU time (seconds, or GFLOP/s).
struct WallCpu {
  double wall = 0, cpu = 0;
};

// C = A B with n x n x n through the kernels' gemm(). FLOPs: 2 n^3 (n^3 multiply-adds).
template <typename T>
struct SquareGemm {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  explicit SquareGemm(I64 n)
      : a(Mat::Random(n, n)),
        b(Mat::Random(n, n)),
        c(n, n),
        flops(2.0 * static_cast<double>(n * n * n)) {}

  WallCpu time_one() {
    const Stamp t0 = Stamp::now();
    ppbench::cpu::gemm(a, b, c);
    const Stamp t1 = Stamp::now();
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
    return {seconds(t1.wall - t0.wall), t1.cpu - t0.cpu};
  }

  Mat a, b, c;
  double flops;
};

template <typename T>
void BM_GemmPeak(benchmark::State& state, I64 n) {
  SquareGemm<T> product(n);
  WallCpu total;
  for (auto _ : state) {
    const WallCpu one = product.time_one();
    state.SetIterationTime(one.wall);
    total.wall += one.wall;
    total.cpu += one.cpu;
  }
  set_flop_counters(state, product.flops, total.wall, total.cpu);
}

// The GEMM peak in GFLOP/s, wall and CPU based, that the layer rows of dtype T divide by. It was
// once the best BM_GemmPeak row run so far, which assumed the GEMMs ran first: under
// --benchmark_enable_random_interleaving (make perf-ci) a layer's first repetitions then had no
// peak and later ones a smaller one than their neighbours (of_peak > 1), and a filter without
// BM_GemmPeak left every row without. Timed here instead, on the first call (a layer row's set-up,
// outside its timed loop; a function-local static, so once per process and dtype): the best of a
// fixed number of products at the layers' size, after one untimed product that warms caches and
// the library. Best, not mean: a peak; a product that a neighbour's time slice hit does not count.
constexpr I64 kPeakSize = 1024;
constexpr int kPeakProducts = 10;

template <typename T>
WallCpu gemm_peak() {
  static const WallCpu peak = [] {
    SquareGemm<T> product(kPeakSize);
    product.time_one();
    WallCpu best = product.time_one();
    for (int k = 1; k < kPeakProducts; ++k) {
      const WallCpu one = product.time_one();
      best.wall = std::min(best.wall, one.wall);
      best.cpu = std::min(best.cpu, one.cpu);
    }
    return WallCpu{product.flops / 1e9 / best.wall, product.flops / 1e9 / best.cpu};
  }();
  return peak;
}

// ---- layers --------------------------------------------------------------------------------

enum class Kind { kLinear, kMlpBlock, kAttention, kSwiGLU, kDecoder, kConv };
enum class Pass { kF, kI, kW };

struct PassFlops {
  double f = 0, i = 0, w = 0;
  double of(Pass p) const { return p == Pass::kF ? f : p == Pass::kI ? i : w; }
};

struct Case {
  std::string name;
  Kind kind;
  std::vector<I64> in_shape;
  PassFlops flops;
  // kLinear, kMlpBlock: in -> out features. kConv: channels in -> out, kernel k x k, stride 1.
  I64 in = 0, out = 0, k = 0;
  DecoderConfig dec;  // kAttention, kSwiGLU, kDecoder
};

// Linear(in, out) on M rows: each pass is one GEMM of M x in x out,
//   F: y = x W,  I: dx = dy W^T,  W: dW += x^T dy   ->  2 M in out each.
PassFlops linear_flops(I64 m, I64 in, I64 out) {
  const double g = 2.0 * static_cast<double>(m * in * out);
  return {g, g, g};
}

// Attention on b sequences of s tokens, hidden h, nh query heads and nkv kv heads of size d.
//   proj = 2 M h (nh + 2 nkv) d  [fused qkv]  +  2 M (nh d) h  [output], M = b s;
//   every pass runs each projection's GEMM once (F: forward, I: input grad, W: weight grad).
//   F also runs per (batch, head) S = q k^T and o = P v: 2 GEMMs of 2 s^2 d;
//   I runs dv = P^T do, dP = do v^T, dq = dS k, dk = dS^T q: 4 GEMMs of 2 s^2 d.
// The kernel materialises the whole s x s score matrix (the causal mask zeroes the upper half
// after the GEMM), so these are executed FLOPs; the model FLOPs of causal attention are fewer.
PassFlops attention_flops(I64 b, I64 s, const DecoderConfig& c) {
  const I64 d = c.hidden / c.heads, m = b * s;
  const double proj = 2.0 * static_cast<double>(m * c.hidden * (c.heads + 2 * c.kv_heads) * d) +
                      2.0 * static_cast<double>(m * c.heads * d * c.hidden);
  const double scores = 2.0 * static_cast<double>(b * c.heads * s * s * d);  // one s x s x d GEMM
  return {proj + 2 * scores, proj + 4 * scores, proj};
}

// SwiGLU(h, f) on M rows: fused gate|up GEMM M x h x 2f and down GEMM M x f x h, once per pass:
//   2 M h 2f + 2 M f h = 6 M h f each.
PassFlops swiglu_flops(I64 m, I64 h, I64 f) {
  const double g = 6.0 * static_cast<double>(m * h * f);
  return {g, g, g};
}

PassFlops operator+(PassFlops a, PassFlops b) { return {a.f + b.f, a.i + b.i, a.w + b.w}; }

// Conv2d k x k, stride 1, "same" padding, on N x H x W x Cin: im2col then one GEMM of
// M x (k^2 Cin) x Cout with M = N H W (padding zeros are multiplied too), once per pass:
//   2 M k^2 Cin Cout each.
PassFlops conv_flops(I64 n, I64 h, I64 w, I64 cin, I64 cout, I64 k) {
  const double g = 2.0 * static_cast<double>(n * h * w * k * k * cin * cout);
  return {g, g, g};
}

std::vector<Case> cases() {
  std::vector<Case> all;
  // The mlp workload's default width, on a 256-row micro-batch.
  constexpr I64 kRows = 256, kWidth = 1024;
  {
    Case c{"linear_1024",
           Kind::kLinear,
           {kRows, kWidth},
           linear_flops(kRows, kWidth, kWidth),
           kWidth,
           kWidth,
           0,
           {}};
    all.push_back(c);
    c.name = "mlp_block_1024";  // linear + GeLU: the GeLU is not counted
    c.kind = Kind::kMlpBlock;
    all.push_back(c);
  }
  // A CPU-sized Llama layer (GQA 8/2 heads, head_dim 64, SwiGLU 1376 ~ 8/3 * 512) on one
  // 256-token sequence; and GPipe's Transformer layer at the same width (MHA, GeLU MLP 4x).
  constexpr I64 kBatch = 1, kSeq = 256, kHidden = 512;
  const DecoderConfig llama = DecoderConfig::llama(kHidden, 8, 2, 1376);
  const DecoderConfig gpipe = DecoderConfig::gpipe(kHidden, 8, 4 * kHidden);
  const std::vector<I64> tokens{kBatch, kSeq, kHidden};
  const I64 m = kBatch * kSeq;
  all.push_back({"attention_gqa", Kind::kAttention, tokens, attention_flops(kBatch, kSeq, llama), 0,
                 0, 0, llama});
  all.push_back(
      {"swiglu", Kind::kSwiGLU, tokens, swiglu_flops(m, kHidden, llama.ffn), 0, 0, 0, llama});
  // Decoder layer = attention + FFN; RMSNorm / LayerNorm and the residual adds are not counted.
  all.push_back({"llama_decoder", Kind::kDecoder, tokens,
                 attention_flops(kBatch, kSeq, llama) + swiglu_flops(m, kHidden, llama.ffn), 0, 0,
                 0, llama});
  // GeLU MLP = two linears, h -> f -> h.
  all.push_back({"gpipe_decoder", Kind::kDecoder, tokens,
                 attention_flops(kBatch, kSeq, gpipe) + linear_flops(m, kHidden, gpipe.ffn) +
                     linear_flops(m, gpipe.ffn, kHidden),
                 0, 0, 0, gpipe});
  // AmoebaNet-D(., 256)-like: a normal cell's 256 channels at 28 x 28, one image.
  constexpr I64 kImg = 28, kCh = 256;
  for (I64 k : {1, 3}) {
    all.push_back({"conv" + std::to_string(k) + "x" + std::to_string(k),
                   Kind::kConv,
                   {1, kImg, kImg, kCh},
                   conv_flops(1, kImg, kImg, kCh, kCh, k),
                   kCh,
                   kCh,
                   k,
                   {}});
  }
  return all;
}

template <typename T>
LayerPtr<T> build(const Case& c) {
  constexpr std::uint64_t kSeed = 42;
  switch (c.kind) {
    case Kind::kLinear:
      return std::make_unique<Linear<T>>(c.in, c.out, true, kSeed);
    case Kind::kMlpBlock:
      return make_mlp_block<T>(c.in, c.out, kSeed);
    case Kind::kAttention:
      return std::make_unique<Attention<T>>(c.dec.attention(), kSeed);
    case Kind::kSwiGLU:
      return std::make_unique<SwiGLU<T>>(c.dec.hidden, c.dec.ffn, kSeed);
    case Kind::kDecoder:
      return make_decoder_layer<T>(c.dec, kSeed);
    case Kind::kConv:
      return std::make_unique<Conv2d<T>>(c.in, c.out, c.k, c.k, 1, kSeed);
  }
  return nullptr;
}

const char* pass_name(Pass p) { return p == Pass::kF ? "F" : p == Pass::kI ? "I" : "W"; }

template <typename T>
void BM_Layer(benchmark::State& state, const Case& c, Pass pass) {
  LayerPtr<T> layer;
  Tensor<T> x(c.in_shape), dy;
  Saved<T> saved;
  try {
    layer = build<T>(c);
    Rng rng(7);
    rng.fill(x, -1.0, 1.0);
    // One untimed step: the output's shape for dy, and warm caches and allocator.
    const Tensor<T> y = layer->forward(x, saved);
    dy = Tensor<T>(y.shape);
    rng.fill(dy, -1.0, 1.0);
    layer->backward(dy, saved);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const WallCpu peak = gemm_peak<T>();  // timed on the first call: before the loop, not in it
  double wall = 0, cpu = 0;
  for (auto _ : state) {
    // W accumulates into the gradients; they grow linearly with the iterations, which stays far
    // from overflow, so they are not reset (a reset inside the loop would need PauseTiming).
    const Stamp t0 = Stamp::now();
    Tensor<T> y = layer->forward(x, saved);
    const Stamp t1 = Stamp::now();
    Tensor<T> dx = layer->backward_input(dy, saved);
    const Stamp t2 = Stamp::now();
    layer->backward_weight(saved);
    const Stamp t3 = Stamp::now();
    benchmark::DoNotOptimize(y.data.data());
    benchmark::DoNotOptimize(dx.data.data());
    const Stamp& begin = pass == Pass::kF ? t0 : pass == Pass::kI ? t1 : t2;
    const Stamp& end = pass == Pass::kF ? t1 : pass == Pass::kI ? t2 : t3;
    state.SetIterationTime(seconds(end.wall - begin.wall));
    wall += seconds(end.wall - begin.wall);
    cpu += end.cpu - begin.cpu;
  }
  set_flop_counters(state, c.flops.of(pass), wall, cpu);
  // Beside the GEMM peak of the same dtype, wall to wall and CPU to CPU.
  state.counters["of_peak"] = state.counters["GFLOP/s"].value / peak.wall;
  state.counters["cpu_of_peak"] = state.counters["cpu_GFLOP/s"].value / peak.cpu;
}

void register_benchmarks() {
  // 1024 is about the size of the layers' GEMMs; 2048 shows whether a larger one does better.
  for (I64 n : {1024, 2048}) {
    for (int bits : {32, 64}) {
      const std::string name = "BM_GemmPeak/f" + std::to_string(bits) + "/" + std::to_string(n);
      auto* b = bits == 32 ? benchmark::RegisterBenchmark(name.c_str(), BM_GemmPeak<float>, n)
                           : benchmark::RegisterBenchmark(name.c_str(), BM_GemmPeak<double>, n);
      ppbench::bench::default_min_time(b->UseManualTime(), 0.3)->Unit(benchmark::kMillisecond);
    }
  }
  static const std::vector<Case> kCases = cases();  // registered benchmarks keep references
  for (const Case& c : kCases)
    for (int bits : {32, 64})
      for (Pass p : {Pass::kF, Pass::kI, Pass::kW}) {
        const std::string name =
            "BM_Layer/" + c.name + "/f" + std::to_string(bits) + "/" + pass_name(p);
        auto* b = bits == 32 ? benchmark::RegisterBenchmark(name.c_str(), BM_Layer<float>, c, p)
                             : benchmark::RegisterBenchmark(name.c_str(), BM_Layer<double>, c, p);
        // A pass is ~1/3 of the wall clock of its loop: 0.2 s of pass time keeps the whole
        // program near a minute and a half.
        ppbench::bench::default_min_time(b->UseManualTime(), 0.2)->Unit(benchmark::kMillisecond);
      }
}

}  // namespace

int main(int argc, char** argv) {
  return ppbench::bench::run_cpu_benchmarks(argc, argv, [] {
    benchmark::AddCustomContext("eigen_simd", Eigen::SimdInstructionSetsInUse());
    benchmark::AddCustomContext("cpu_gemm", ppbench::cpu::gemm_library());
    benchmark::AddCustomContext("eigen_threads", std::to_string(Eigen::nbThreads()));
    register_benchmarks();
  });
}
