// A full Llama-3-8B decoder layer's F + I + W on the GPU (issue 4, item 6): hidden 4096, 32 query
// and 8 key/value heads of 128, SwiGLU ffn 14336, RMSNorm, rotary embeddings; sequence 4096,
// micro-batch 1, bf16 with f32 accumulation. scripts/torch_reference.py times PyTorch's forward +
// backward of the same layer in the same gpu-check run, for the comparison.
//
// Each iteration runs F, then I, then W on one micro-batch (W sees exactly what I left, as in a
// pipeline step) with CUDA events between the passes: the benchmark's (manual) time is F + I + W,
// counters F_ms, I_ms and W_ms split it, and arena_peak_GiB is the activation arena's high-water
// mark (the attention still materialises the s x s scores; see workloads/cuda/attention.h).
//
// Set-up draws the ~218 M parameters on the host with the CPU's generator (seconds). If the
// device cannot hold the layer the row is skipped with the arena's out-of-memory message; without
// a visible GPU the program prints why and exits 0.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include "bench_context.h"
#include "workloads/cuda/kernels.h"

namespace {

using namespace ppbench::cuda;

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

void BM_LlamaLayer(benchmark::State& state, std::int64_t seq, std::int64_t mb, DType dtype) {
  const DecoderConfig dc = DecoderConfig::llama(4096, 32, 8, 14336);
  try {
    // Parameters (values in dtype, gradients in f32): about 6 bytes per parameter.
    DeviceArena params("llama layer params", std::size_t{2} << 30);
    LayerPtr layer = make_decoder_layer(params, dc, dtype, 42);
    std::size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    // Leave room for cuBLASLt's workspace and the CUDA context's own allocations.
    const std::size_t margin = std::size_t{2} << 30;
    if (free_b <= margin) throw ArenaOutOfMemory("cuda_layer_bench: no device memory left");
    DeviceArena acts("llama layer activations",
                     std::min<std::size_t>(free_b - margin, std::size_t{96} << 30));
    Context ctx(acts);
    Events ev;

    std::vector<float> xv(static_cast<std::size_t>(mb * seq * dc.hidden));
    ppbench::cpu::Rng rng(7);
    for (float& v : xv) v = static_cast<float>(rng.uniform(-1, 1));
    DTensor x(acts, {mb, seq, dc.hidden}, dtype, "x");
    upload(x, xv);
    DTensor dy(acts, {mb, seq, dc.hidden}, dtype, "dy");
    for (float& v : xv) v = static_cast<float>(rng.uniform(-1e-3, 1e-3));
    upload(dy, xv);

    auto step = [&] {
      Saved saved;
      CUDA_CHECK(cudaEventRecord(ev.e[0], ctx.stream));
      { DTensor y = layer->forward(ctx, x, saved); }
      CUDA_CHECK(cudaEventRecord(ev.e[1], ctx.stream));
      { DTensor dx = layer->backward_input(ctx, dy, saved); }
      CUDA_CHECK(cudaEventRecord(ev.e[2], ctx.stream));
      layer->backward_weight(ctx, saved);
      CUDA_CHECK(cudaEventRecord(ev.e[3], ctx.stream));
      CUDA_CHECK(cudaEventSynchronize(ev.e[3]));
    };
    step();  // GEMM algorithm choice and warm-up
    acts.reset_peak();
    double f = 0, i = 0, w = 0;
    for (auto _ : state) {
      step();
      const double tf = ev.ms(0, 1), ti = ev.ms(1, 2), tw = ev.ms(2, 3);
      f += tf, i += ti, w += tw;
      state.SetIterationTime((tf + ti + tw) * 1e-3);
    }
    const double n =
        static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
    state.counters["F_ms"] = f / n;
    state.counters["I_ms"] = i / n;
    state.counters["W_ms"] = w / n;
    state.counters["FIW_ms"] = (f + i + w) / n;
    state.counters["arena_peak_GiB"] = static_cast<double>(acts.peak()) / (1u << 30);
  } catch (const ArenaOutOfMemory& e) {
    state.SkipWithError((std::string("does not fit on this device: ") + e.what()).c_str());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
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
      ->MinTime(2.0);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
