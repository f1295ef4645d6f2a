// Every GPU layer's F, I and W against the CPU float64 kernels on random inputs, odd shapes
// included, in f32 (relative error <= 1e-4) and bf16 (<= 2e-2). Skips without a GPU.
#include <functional>
#include <utility>

#include "tests/cuda/gpu_test_util.h"

namespace ppbench::cuda::testing {
namespace {

class Layers : public GpuTest {
 protected:
  // The GPU attention layer (its fused core unless told otherwise) against the CPU's, both built
  // from `ac` with the same seed, on an input of `in_shape` drawn from that seed too.
  void check_attention(const AttentionConfig& ac, const Shape& in_shape, std::uint64_t seed,
                       AttentionKernel kernel = AttentionKernel::kFused) {
    Attention g(*params_, ac, dtype(), seed, kernel);
    cpu::Attention<double> c(ac, seed);
    check_layer(g, c, in_shape, seed);
  }
};

// Class ids drawn by the CPU's Rng, as ints (the CPU loss) and as floats (uploaded as i32).
std::pair<std::vector<std::int32_t>, std::vector<float>> random_targets(std::int64_t rows,
                                                                        std::int64_t classes,
                                                                        std::uint64_t seed) {
  std::vector<std::int32_t> ids;
  std::vector<float> as_float;
  cpu::Rng rng(seed);
  for (std::int64_t r = 0; r < rows; ++r) {
    ids.push_back(static_cast<std::int32_t>(rng.uniform() * static_cast<double>(classes)));
    as_float.push_back(static_cast<float>(ids.back()));
  }
  return {ids, as_float};
}

TEST_P(Layers, LinearWithBiasOddShape) {
  Linear g(*params_, 37, 19, true, dtype(), 11);
  cpu::Linear<double> c(37, 19, true, 11);
  check_layer(g, c, {3, 5, 37}, 1);
}

TEST_P(Layers, LinearWithoutBias) {
  Linear g(*params_, 64, 96, false, dtype(), 12);
  cpu::Linear<double> c(64, 96, false, 12);
  check_layer(g, c, {2, 7, 64}, 2);
}

TEST_P(Layers, GeLU) {
  GeLU g;
  cpu::GeLU<double> c;
  check_layer(g, c, {3, 333}, 3);
}

TEST_P(Layers, ReLU) {
  ReLU g;
  cpu::ReLU<double> c;
  check_layer(g, c, {5, 77}, 4);
}

TEST_P(Layers, SwiGLU) {
  SwiGLU g(*params_, 48, 72, dtype(), 5);
  cpu::SwiGLU<double> c(48, 72, 5);
  check_layer(g, c, {2, 9, 48}, 5);
}

TEST_P(Layers, RMSNormOddWidth) {
  RMSNorm g(*params_, 1001, dtype());
  cpu::RMSNorm<double> c(1001);
  // Non-trivial gamma so that its gradient and dx depend on it.
  std::vector<float> gamma = random(1001, 77, 0.5, 1.5);
  upload(g.gamma.value, gamma);
  check_layer(g, c, {3, 11, 1001}, 6);
}

TEST_P(Layers, LayerNormOddWidth) {
  LayerNorm g(*params_, 257, dtype());
  cpu::LayerNorm<double> c(257);
  upload(g.gamma.value, random(257, 78, 0.5, 1.5));
  upload(g.beta.value, random(257, 79, -0.5, 0.5));
  check_layer(g, c, {13, 257}, 7);
}

TEST_P(Layers, RotaryEmbedding) {
  RotaryEmbedding g(3, 10);
  cpu::RotaryEmbedding<double> c(3, 10);
  check_layer(g, c, {2, 37, 30}, 8);
}

TEST_P(Layers, EmbeddingWithRepeatedTokens) {
  Embedding g(*params_, 23, 40, dtype(), 9);
  cpu::Embedding<double> c(23, 40, 9);
  check_layer(g, c, {4, 31}, 9, /*vocab=*/23);  // 124 tokens of 23: many repeats
}

TEST_P(Layers, GroupedQueryAttentionWithRope) {
  AttentionConfig ac;
  ac.hidden = 64;
  ac.heads = 8;
  ac.kv_heads = 2;
  check_attention(ac, {2, 19, 64}, 10);
}

TEST_P(Layers, MultiHeadAttentionWithBiasNoRope) {
  AttentionConfig ac;
  ac.hidden = 48;
  ac.heads = 3;
  ac.bias = true;
  ac.rope = false;
  check_attention(ac, {1, 33, 48}, 11);
}

// The materialised core on the same case: two implementations, one reference.
TEST_P(Layers, GroupedQueryAttentionMaterialised) {
  AttentionConfig ac;
  ac.hidden = 64;
  ac.heads = 8;
  ac.kv_heads = 2;
  check_attention(ac, {2, 19, 64}, 10, AttentionKernel::kMaterialised);
}

// The fused kernels' edges: a sequence that spans several query and key tiles and ends inside
// one (tiles hold 16 to 64 rows), a head_dim that is not a multiple of 16 (padded in shared
// memory) and, in the next case, not a multiple of the 16-byte vector loads either.
TEST_P(Layers, FusedAttentionAcrossTiles) {
  AttentionConfig ac;
  ac.hidden = 96;
  ac.heads = 4;
  ac.kv_heads = 2;  // head_dim 24
  check_attention(ac, {2, 150, 96}, 13);
}

TEST_P(Layers, FusedAttentionOddHeadDim) {
  AttentionConfig ac;
  ac.hidden = 18;
  ac.heads = 3;  // head_dim 6, plain multi-head
  ac.rope = false;
  check_attention(ac, {3, 67, 18}, 14);
}

// head_dim 128, Llama's: the tiles the backward picks at that width (32 x 64 in f32 on an H100,
// where 64 x 64 would not fit in shared memory) are not the ones the narrower cases above use.
TEST_P(Layers, FusedAttentionHeadDim128) {
  AttentionConfig ac;
  ac.hidden = 256;
  ac.heads = 2;
  ac.kv_heads = 2;
  check_attention(ac, {1, 100, 256}, 15);
}

// The FlashAttention-2 kernels (bf16 at head_dim 64 and 128; f32 runs the general kernels on the
// same shapes): GQA groups of 4 and 2, several 64-query tiles and 128-key blocks, sequences that
// end inside both, and a second batch entry.
TEST_P(Layers, FusedAttentionFlash2Tiles) {
  AttentionConfig ac;
  ac.hidden = 512;
  ac.heads = 8;
  ac.kv_heads = 2;  // head_dim 64
  check_attention(ac, {1, 200, 512}, 16);
  ac.heads = 4;  // head_dim 128
  check_attention(ac, {2, 300, 512}, 17);
}

TEST_P(Layers, LlamaDecoderLayer) {
  const DecoderConfig dc = DecoderConfig::llama(64, 4, 2, 96);
  LayerPtr g = make_decoder_layer(*params_, dc, dtype(), 12);
  cpu::LayerPtr<double> c = cpu::make_decoder_layer<double>(dc, 12);
  check_layer(*g, *c, {2, 17, 64}, 12);
}

TEST_P(Layers, GPipeDecoderLayer) {
  const DecoderConfig dc = DecoderConfig::gpipe(48, 4, 80);
  LayerPtr g = make_decoder_layer(*params_, dc, dtype(), 13);
  cpu::LayerPtr<double> c = cpu::make_decoder_layer<double>(dc, 13);
  check_layer(*g, *c, {3, 9, 48}, 13);
}

TEST_P(Layers, MlpBlock) {
  LayerPtr g = make_mlp_block(*params_, 30, 50, dtype(), 14);
  cpu::LayerPtr<double> c = cpu::make_mlp_block<double>(30, 50, 14);
  check_layer(*g, *c, {7, 30}, 14);
}

TEST_P(Layers, CrossEntropyLossAndGradient) {
  const std::int64_t rows = 37, classes = 1000;
  std::vector<float> z = random(rows * classes, 15, -4, 4);
  const auto [ti, tf] = random_targets(rows, classes, 16);
  SoftmaxCrossEntropy g;
  cpu::SoftmaxCrossEntropy<double> c;
  Saved sg;
  cpu::Saved<double> sc;
  DTensor loss =
      g.forward(*ctx_, device(z, {rows, classes}, dtype()), device(tf, {rows}, DType::kI32), sg);
  const double lc = c.forward(host(z, {rows, classes}), ti, sc);
  EXPECT_LE(std::abs(download(loss)[0] - lc) / std::abs(lc), tol());
  DTensor dz = g.backward_input(*ctx_, sg, 0.25f);
  cpu::Tensor<double> dzc = c.backward_input(sc, 0.25);
  EXPECT_LE(rel_error(download(dz), dzc.data), tol());
  EXPECT_EQ(sg.bytes(), 0);
}

// The loss of thousands of rows (one block each) is the same bits on every run: the rows' terms
// are added in a fixed order, not by atomics in whatever order the blocks finish.
TEST_P(Layers, CrossEntropyLossIsTheSameEveryRun) {
  const std::int64_t rows = 5000, classes = 64;
  std::vector<float> z = random(rows * classes, 17, -4, 4);
  const auto [ti, tf] = random_targets(rows, classes, 18);
  SoftmaxCrossEntropy g;
  const DTensor logits = device(z, {rows, classes}, dtype());
  const DTensor targets = device(tf, {rows}, DType::kI32);
  std::vector<float> losses;
  for (int run = 0; run < 3; ++run) {
    Saved s;
    losses.push_back(download(g.forward(*ctx_, logits, targets, s))[0]);
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(losses[0], losses[2]);
  cpu::SoftmaxCrossEntropy<double> c;
  cpu::Saved<double> sc;
  const double lc = c.forward(host(z, {rows, classes}), ti, sc);
  EXPECT_LE(std::abs(losses[0] - lc) / std::abs(lc), tol());
}

// A GEMM shape's plan is built once and reused; the bias pointer, the one attribute that changes
// between calls, must follow each call (a stale one would add the first call's bias twice).
TEST_P(Layers, GemmPlanIsReusedWithEachCallsBias) {
  const std::int64_t m = 5, n = 7, k = 3;
  const std::vector<float> av = random(m * k, 31), bv = random(k * n, 32);
  const std::vector<float> bias1 = random(n, 33), bias2 = random(n, 34);
  DTensor a = device(av, {m, k}, dtype()), b = device(bv, {k, n}, dtype());
  DTensor d1 = device(bias1, {n}, dtype()), d2 = device(bias2, {n}, dtype());
  DTensor c1(*acts_, {m, n}, dtype(), "c1"), c2(*acts_, {m, n}, dtype(), "c2");
  const std::size_t before = ctx_->gemm_plans.size();
  gemm(*ctx_, m, n, k, a.data(), false, b.data(), false, dtype(), c1.data(), dtype(), 1.0f, 0.0f,
       d1.data());
  gemm(*ctx_, m, n, k, a.data(), false, b.data(), false, dtype(), c2.data(), dtype(), 1.0f, 0.0f,
       d2.data());
  EXPECT_EQ(ctx_->gemm_plans.size(), before + 1) << "one plan for one shape";
  int call = 0;
  for (const auto& [bias, c] : {std::pair{&bias1, &c1}, std::pair{&bias2, &c2}}) {
    ++call;
    std::vector<double> want(static_cast<std::size_t>(m * n));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = (*bias)[static_cast<std::size_t>(j)];
        for (std::int64_t p = 0; p < k; ++p)
          s += static_cast<double>(av[static_cast<std::size_t>(i * k + p)]) *
               bv[static_cast<std::size_t>(p * n + j)];
        want[static_cast<std::size_t>(i * n + j)] = s;
      }
    EXPECT_LE(rel_error(download(*c), want), tol()) << "call " << call;
  }
  // Another shape (no bias) is another plan.
  gemm(*ctx_, m, n, k, a.data(), false, b.data(), false, dtype(), c1.data(), dtype());
  EXPECT_EQ(ctx_->gemm_plans.size(), before + 2);
}

TEST_P(Layers, DeviceArenaOutOfMemoryIsAnError) {
  DeviceArena small("rank 5", 1 << 20);
  small.set_scope("stage 2 I mb 0");
  EXPECT_THROW((void)DTensor(small, {1 << 20}, DType::kF32, "too big"), ArenaOutOfMemory);
  Context ctx(small);
  Linear g(*params_, 1024, 8192, false, dtype(), 1);
  Saved s;
  DTensor x(small, {64, 1024}, dtype(), "x");
  // The [64, 8192] output (1 or 2 MiB) does not fit beside x: a clear error, no crash.
  EXPECT_THROW(g.forward(ctx, x, s), ArenaOutOfMemory);
  CUDA_CHECK(cudaDeviceSynchronize());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Layers, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return dtype_name(i.param);
                         });

}  // namespace
}  // namespace ppbench::cuda::testing
