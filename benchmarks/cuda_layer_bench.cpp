// A full Llama-3-8B decoder layer's F + I + W on the GPU (issue 4, item 6): hidden 4096, 32 query
// and 8 key/value heads of 128, SwiGLU ffn 14336, RMSNorm, rotary embeddings; sequence 4096,
// micro-batch 1, bf16 with f32 accumulation. scripts/torch_reference.py times PyTorch's forward +
// backward of the same layer (and, with --parts, of the same parts) in the same gpu-check run, and
// scripts/compare_torch.py puts the two side by side.
//
// BM_LlamaLayer/llama3-8b/seq4096/mb1/bf16: each iteration runs F, then I, then W on one
// micro-batch (W sees exactly what I left, as in a pipeline step) with CUDA events between the
// passes: the benchmark's (manual) time is F + I + W, counters F_ms, I_ms, W_ms and FIW_ms are
// medians over the iterations (compare_torch.py compares FIW_ms with PyTorch's median), and
// arena_peak_GiB is the activation arena's high-water mark.
//
// BM_LlamaPart/llama3-8b/<part>/seq4096/mb1/bf16: the layer's parts alone at the same shape, so
// that the gap to PyTorch can be explained per kernel:
//   rmsnorm                      RMSNorm over hidden 4096 (twice in the layer: per_layer = 2)
//   qkv_proj                     Linear 4096 -> (32 + 2 * 8) * 128, no bias
//   attention_core               the fused core the layer uses, on random head-major q
//                                [1, 32, s, 128], k and v [1, 8, s, 128]: F = flash forward,
//                                B = rowsum(dO * O) + flash backward
//   attention_core_materialised  the materialised core on the same inputs; not in the layer
//                                (per_layer = 0), shown beside the fused one
//   out_proj                     Linear 4096 -> 4096, no bias
//   swiglu_mlp                   SwiGLU, hidden 4096, ffn 14336 (fused gate|up, then down)
// Not isolated: the head permutes with RoPE folded in and the residual adds (attention.cu's own
// kernels, not exposed); compare_torch.py reports them as the layer minus its parts.
// Counters: F_ms, I_ms, W_ms (attention: F_ms, B_ms) and total_ms, medians over the iterations;
// TFLOP/s of the GEMM FLOPs (causal attention counted at half: forward 4 b h s^2 d / 2, backward
// 2.5x forward); for RMSNorm, which does no GEMM, GB/s of the least traffic its passes need;
// per_layer (how often the layer runs the part) and arena_peak_GiB.
//
// Set-up draws the inputs on the host with the CPU's generator (the parameters are filled on the
// device). The part rows run a fixed number of iterations so that Google Benchmark calls each once
// and their set-up runs once. If the device cannot hold a row it is skipped with the arena's
// out-of-memory message; without a visible GPU the program prints why and exits 0.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include "bench_context.h"
#include "workloads/cpu/tensor.h"
#include "workloads/cuda/kernels.h"

namespace {

using namespace ppbench::cuda;
using ppbench::DecoderConfig;

// Llama-3-8B's layer shape, and the shape every row runs at.
constexpr std::int64_t kHidden = 4096, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kFfn = 14336;
constexpr std::int64_t kQkvOut = (kHeads + 2 * kKvHeads) * kHeadDim;
constexpr std::int64_t kSeq = 4096, kMicroBatch = 1;
constexpr DType kDType = DType::kBF16;
// Enough for a stable median of device times; each part lasts 0.1 to 10 ms.
constexpr benchmark::IterationCount kPartIterations = 50;
// The whole layer (tens of ms an iteration) by a fixed count too: with a minimum time Google
// Benchmark calls the function several times, each redoing the set-up (a 2 GiB parameter arena
// filled, tens of GiB of activation arena, the inputs drawn on the host).
constexpr benchmark::IterationCount kLayerIterations = 30;
constexpr int kPartWarmup = 3;

struct Events {
  cudaEvent_t e[4] = {};
  Events() {
    for (cudaEvent_t& x : e) CUDA_CHECK(cudaEventCreate(&x));
  }
  ~Events() {
    for (cudaEvent_t x : e) cudaEventDestroy(x);
  }
  float ms(int a, int b) const {
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, e[a], e[b]));
    return t;
  }
};

// Bytes for an activation arena: the free device memory less room for cuBLASLt's workspace and
// the CUDA context's own allocations, at most `cap`.
std::size_t activation_arena_bytes(std::size_t cap) {
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const std::size_t margin = std::size_t{2} << 30;
  if (free_b <= margin) throw DeviceOutOfMemory("cuda_layer_bench: no device memory left");
  return std::min(free_b - margin, cap);
}

std::vector<float> random_values(std::int64_t n, double a, ppbench::cpu::Rng& rng) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.uniform(-a, a));
  return v;
}

DTensor random_tensor(DeviceArena& arena, const Shape& shape, DType dtype, double a,
                      ppbench::cpu::Rng& rng, const char* what) {
  DTensor t(arena, shape, dtype, what);
  upload(t, random_values(shape_numel(shape), a, rng));
  return t;
}

// One F, I, W of `layer` with events around each pass; waits for the W pass to finish.
void run_fiw(Layer& layer, Context& ctx, const Events& ev, const DTensor& x, const DTensor& dy) {
  Saved saved;
  CUDA_CHECK(cudaEventRecord(ev.e[0], ctx.stream));
  { DTensor y = layer.forward(ctx, x, saved); }
  CUDA_CHECK(cudaEventRecord(ev.e[1], ctx.stream));
  { DTensor dx = layer.backward_input(ctx, dy, saved); }
  CUDA_CHECK(cudaEventRecord(ev.e[2], ctx.stream));
  layer.backward_weight(ctx, saved);
  CUDA_CHECK(cudaEventRecord(ev.e[3], ctx.stream));
  CUDA_CHECK(cudaEventSynchronize(ev.e[3]));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}

// Per-iteration pass times of a part row, reported as medians: the PyTorch side reports medians.
struct PassTimes {
  std::vector<double> pass[3];
  std::vector<double> total;
  void add(std::initializer_list<double> ms) {
    double sum = 0;
    std::size_t i = 0;
    for (double t : ms) pass[i++].push_back(t), sum += t;
    total.push_back(sum);
  }
};

// Sets the pass counters (`names`, one per pass), total_ms, per_layer and arena_peak_GiB; returns
// total_ms for the caller's rate counter.
double report_part(benchmark::State& state, const PassTimes& t, const char* const names[],
                   int passes, int per_layer, const DeviceArena& acts) {
  for (int p = 0; p < passes; ++p) state.counters[names[p]] = median(t.pass[p]);
  const double total = median(t.total);
  state.counters["total_ms"] = total;
  state.counters["per_layer"] = static_cast<double>(per_layer);
  state.counters["arena_peak_GiB"] = static_cast<double>(acts.peak()) / (1u << 30);
  return total;
}

// FLOPs in `ms` milliseconds as TFLOP/s (bytes as GB/s: pass the bytes times 1e3).
double tera_per_s(double work, double ms) { return ms > 0 ? work / ms * 1e-9 : 0.0; }

void BM_LlamaLayer(benchmark::State& state, std::int64_t seq, std::int64_t mb, DType dtype) {
  const DecoderConfig dc = DecoderConfig::llama(kHidden, kHeads, kKvHeads, kFfn);
  try {
    // Parameters (values in dtype, gradients in f32): about 6 bytes per parameter.
    DeviceArena params("llama layer params", std::size_t{2} << 30);
    LayerPtr layer = make_decoder_layer(params, dc, dtype, 42);
    DeviceArena acts("llama layer activations", activation_arena_bytes(std::size_t{96} << 30));
    Context ctx(acts);
    Events ev;

    ppbench::cpu::Rng rng(7);
    const DTensor x = random_tensor(acts, {mb, seq, dc.hidden}, dtype, 1.0, rng, "x");
    const DTensor dy = random_tensor(acts, {mb, seq, dc.hidden}, dtype, 1e-3, rng, "dy");

    run_fiw(*layer, ctx, ev, x, dy);  // GEMM algorithm choice and warm-up
    acts.reset_peak();
    PassTimes t;
    for (auto _ : state) {
      run_fiw(*layer, ctx, ev, x, dy);
      t.add({ev.ms(0, 1), ev.ms(1, 2), ev.ms(2, 3)});
      state.SetIterationTime(t.total.back() * 1e-3);
    }
    // Medians, as PyTorch's side reports them: a mean would carry a stalled iteration into the
    // ratio the goal is judged on.
    state.counters["F_ms"] = median(t.pass[0]);
    state.counters["I_ms"] = median(t.pass[1]);
    state.counters["W_ms"] = median(t.pass[2]);
    state.counters["FIW_ms"] = median(t.total);
    state.counters["arena_peak_GiB"] = static_cast<double>(acts.peak()) / (1u << 30);
  } catch (const DeviceOutOfMemory& e) {
    state.SkipWithError((std::string("does not fit on this device: ") + e.what()).c_str());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// A part that is a Layer of its own: its input and output widths, how it is built, its work.
struct LayerPart {
  const char* name;
  std::int64_t in, out;
  std::function<LayerPtr(DeviceArena&)> make;
  double flops;      // F + I + W GEMM FLOPs, 0 for a part without GEMMs
  double min_bytes;  // F + I + W least traffic, for a part without GEMMs
  int per_layer;
};

void BM_LayerPart(benchmark::State& state, const LayerPart& part) {
  static const char* const kNames[] = {"F_ms", "I_ms", "W_ms"};
  try {
    DeviceArena params("llama part params", std::size_t{2} << 30);
    LayerPtr layer = part.make(params);
    DeviceArena acts("llama part activations", activation_arena_bytes(std::size_t{16} << 30));
    Context ctx(acts);
    Events ev;
    ppbench::cpu::Rng rng(7);
    const DTensor x = random_tensor(acts, {kMicroBatch, kSeq, part.in}, kDType, 1.0, rng, "x");
    const DTensor dy = random_tensor(acts, {kMicroBatch, kSeq, part.out}, kDType, 1e-3, rng, "dy");

    for (int i = 0; i < kPartWarmup; ++i) run_fiw(*layer, ctx, ev, x, dy);
    acts.reset_peak();
    PassTimes t;
    for (auto _ : state) {
      run_fiw(*layer, ctx, ev, x, dy);
      t.add({ev.ms(0, 1), ev.ms(1, 2), ev.ms(2, 3)});
      state.SetIterationTime(t.total.back() * 1e-3);
    }
    const double ms = report_part(state, t, kNames, 3, part.per_layer, acts);
    if (part.flops > 0) {
      state.counters["TFLOP/s"] = tera_per_s(part.flops, ms);
    } else {
      state.counters["GB/s"] = tera_per_s(part.min_bytes * 1e3, ms);
    }
  } catch (const DeviceOutOfMemory& e) {
    state.SkipWithError((std::string("does not fit on this device: ") + e.what()).c_str());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// [B, H, S, D] values -> [B, S, H * D]: the token layout the layer's output projection sees.
std::vector<float> heads_to_tokens(const std::vector<float>& h, std::int64_t b, std::int64_t nh,
                                   std::int64_t s, std::int64_t d) {
  std::vector<float> t(h.size());
  for (std::int64_t ib = 0; ib < b; ++ib)
    for (std::int64_t n = 0; n < nh; ++n)
      for (std::int64_t is = 0; is < s; ++is)
        std::copy_n(h.begin() + ((ib * nh + n) * s + is) * d, d,
                    t.begin() + ((ib * s + is) * nh + n) * d);
  return t;
}

// The s x s part alone, either core, on random head-major q, k, v and dO.
void BM_AttentionCore(benchmark::State& state, AttentionKernel kernel, int per_layer) {
  static const char* const kNames[] = {"F_ms", "B_ms"};
  try {
    DeviceArena acts("attention core", activation_arena_bytes(std::size_t{16} << 30));
    Context ctx(acts);
    Events ev;
    ppbench::cpu::Rng rng(11);
    const Shape qs{kMicroBatch, kHeads, kSeq, kHeadDim}, kvs{kMicroBatch, kKvHeads, kSeq, kHeadDim};
    const DTensor q = random_tensor(acts, qs, kDType, 1.0, rng, "q");
    const DTensor k = random_tensor(acts, kvs, kDType, 1.0, rng, "k");
    const DTensor v = random_tensor(acts, kvs, kDType, 1.0, rng, "v");
    const std::vector<float> do_host = random_values(shape_numel(qs), 1e-3, rng);
    const DTensor d_o(acts, qs, kDType, "dO");
    upload(d_o, do_host);
    const DTensor o(acts, qs, kDType, "O"), dq(acts, qs, kDType, "dq");
    const DTensor dk(acts, kvs, kDType, "dk"), dv(acts, kvs, kDType, "dv");
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    const bool fused = kernel == AttentionKernel::kFused;

    DTensor lse, delta, o_tokens, do_tokens;  // fused only
    if (fused) {
      const Shape rows{kMicroBatch, kHeads, kSeq}, tokens{kMicroBatch, kSeq, kHeads * kHeadDim};
      lse = DTensor(acts, rows, DType::kF32, "log-sum-exp");
      delta = DTensor(acts, rows, DType::kF32, "rowsum(dO * O)");
      // The layer's backward takes rowsum(dO * O) from O and dO in the token layout (what its
      // output projection keeps); give the row dot that layout too. The forward is deterministic,
      // so the O of one forward now is the O of every timed one.
      flash_attention_forward(ctx, q, k, v, o, lse, scale);
      o_tokens = DTensor(acts, tokens, kDType, "O tokens");
      upload(o_tokens, heads_to_tokens(download(o), kMicroBatch, kHeads, kSeq, kHeadDim));
      do_tokens = DTensor(acts, tokens, kDType, "dO tokens");
      upload(do_tokens, heads_to_tokens(do_host, kMicroBatch, kHeads, kSeq, kHeadDim));
    }
    auto step = [&] {
      DTensor probs;  // materialised only: kept from F to B, as in the layer
      CUDA_CHECK(cudaEventRecord(ev.e[0], ctx.stream));
      if (fused) {
        flash_attention_forward(ctx, q, k, v, o, lse, scale);
      } else {
        probs = materialised_attention_forward(ctx, q, k, v, o, scale);
      }
      CUDA_CHECK(cudaEventRecord(ev.e[1], ctx.stream));
      if (fused) {
        attention_row_dot(ctx, o_tokens, do_tokens, delta, kHeads, kHeadDim);
        flash_attention_backward(ctx, q, k, v, d_o, lse, delta, dq, dk, dv, scale);
      } else {
        materialised_attention_backward(ctx, q, k, v, probs, d_o, dq, dk, dv, scale);
      }
      CUDA_CHECK(cudaEventRecord(ev.e[2], ctx.stream));
      CUDA_CHECK(cudaEventSynchronize(ev.e[2]));
    };
    for (int i = 0; i < kPartWarmup; ++i) step();
    acts.reset_peak();
    PassTimes t;
    for (auto _ : state) {
      step();
      t.add({ev.ms(0, 1), ev.ms(1, 2)});
      state.SetIterationTime(t.total.back() * 1e-3);
    }
    const double forward = 4.0 * static_cast<double>(kMicroBatch * kHeads) *
                           static_cast<double>(kSeq) * static_cast<double>(kSeq) *
                           static_cast<double>(kHeadDim) / 2;
    const double ms = report_part(state, t, kNames, 2, per_layer, acts);
    state.counters["TFLOP/s"] = tera_per_s(forward * 3.5, ms);  // backward = 2.5 x forward
  } catch (const DeviceOutOfMemory& e) {
    state.SkipWithError((std::string("does not fit on this device: ") + e.what()).c_str());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// F, I and W of a bias-free Linear over kSeq tokens: 3 GEMMs of 2 t in out FLOPs.
double linear_flops(std::int64_t in, std::int64_t out) {
  return 3 * 2.0 * static_cast<double>(kMicroBatch * kSeq) * static_cast<double>(in) *
         static_cast<double>(out);
}

std::vector<LayerPart> layer_parts() {
  const double elems = static_cast<double>(kMicroBatch * kSeq * kHidden);
  const double elem_bytes = static_cast<double>(dtype_size(kDType));
  return {
      // F reads x and writes y; I reads x and dy and writes dx.
      {"rmsnorm", kHidden, kHidden,
       [](DeviceArena& p) { return std::make_unique<RMSNorm>(p, kHidden, kDType); }, 0,
       5 * elems * elem_bytes, 2},
      {"qkv_proj", kHidden, kQkvOut,
       [](DeviceArena& p) {
         return std::make_unique<Linear>(p, kHidden, kQkvOut, false, kDType, 1);
       },
       linear_flops(kHidden, kQkvOut), 0, 1},
      {"out_proj", kHeads * kHeadDim, kHidden,
       [](DeviceArena& p) {
         return std::make_unique<Linear>(p, kHeads * kHeadDim, kHidden, false, kDType, 2);
       },
       linear_flops(kHeads * kHeadDim, kHidden), 0, 1},
      {"swiglu_mlp", kHidden, kHidden,
       [](DeviceArena& p) { return std::make_unique<SwiGLU>(p, kHidden, kFfn, kDType, 3); },
       linear_flops(kHidden, 2 * kFfn) + linear_flops(kFfn, kHidden), 0, 1},
  };
}

std::string part_name(const std::string& part) {
  return "BM_LlamaPart/llama3-8b/" + part + "/seq" + std::to_string(kSeq) + "/mb" +
         std::to_string(kMicroBatch) + "/" + dtype_name(kDType);
}

}  // namespace

int main(int argc, char** argv) {
  ppbench::line_buffered_output();
  std::string why;
  if (!has_gpu(&why)) {
    std::printf("cuda_layer_bench: skipped, no CUDA device visible (%s)\n", why.c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  ppbench::add_benchmark_context();
  benchmark::AddCustomContext("gpu", device_info_text());
  benchmark::AddCustomContext("cublas", cublas_version_text());
  benchmark::AddCustomContext("attention", kAttentionNote);
  benchmark::RegisterBenchmark("BM_LlamaLayer/llama3-8b/seq4096/mb1/bf16",
                               [](benchmark::State& s) { BM_LlamaLayer(s, 4096, 1, DType::kBF16); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(kLayerIterations);
  // Fixed iterations: Google Benchmark then calls each part once, so its set-up runs once.
  auto as_part = [](auto* b) {
    b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(kPartIterations);
  };
  for (const LayerPart& p : layer_parts()) {
    as_part(benchmark::RegisterBenchmark(part_name(p.name).c_str(),
                                         [p](benchmark::State& s) { BM_LayerPart(s, p); }));
  }
  as_part(benchmark::RegisterBenchmark(
      part_name("attention_core").c_str(),
      [](benchmark::State& s) { BM_AttentionCore(s, AttentionKernel::kFused, 1); }));
  as_part(benchmark::RegisterBenchmark(
      part_name("attention_core_materialised").c_str(),
      [](benchmark::State& s) { BM_AttentionCore(s, AttentionKernel::kMaterialised, 0); }));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
