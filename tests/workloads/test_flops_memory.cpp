// FLOPs and activation bytes against hand computation on tiny configurations.
#include <gtest/gtest.h>

#include "workloads/amoebanet.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

TransformerConfig tiny(TransformerStyle style, int64_t ffn, int64_t kv_heads, bool dropout) {
  TransformerConfig c;
  c.preset = "test";
  c.style = style;
  c.layers = 2, c.hidden = 16, c.ffn = ffn, c.heads = 4, c.kv_heads = kv_heads;
  c.vocab = 32, c.seq = 8, c.dropout = dropout;
  return c;
}

// Zero Bubble's GPT layer (f = 4h, MHA) at 16 bits: F = sbh(24h + 4s), I = sbh(24h + 8s),
// W = sbh(24h), M_B = sb(34h + 5as), M_W = 32sbh.
TEST(Transformer, GptLayerIsZeroBubbleFormula) {
  const double s = 8, b = 2, h = 16, a = 4;
  const WorkloadSpec spec =
      build_transformer(tiny(TransformerStyle::kGpt, 64, 4, true), 2, DType::kBF16);
  const LayerSpec& l = spec.layers[1];
  EXPECT_EQ(l.kind, LayerKind::kGptLayer);
  EXPECT_EQ(l.flops.f, s * b * h * (24 * h + 4 * s));
  EXPECT_EQ(l.flops.i, s * b * h * (24 * h + 8 * s));
  EXPECT_EQ(l.flops.w, s * b * h * (24 * h));
  EXPECT_EQ(l.paper_activation.b, static_cast<int64_t>(s * b * (34 * h + 5 * a * s)));
  EXPECT_EQ(l.paper_activation.w, static_cast<int64_t>(32 * s * b * h));
  EXPECT_EQ(l.boundary_bytes(), static_cast<int64_t>(2 * s * b * h));
}

// The paper's activations scale with the dtype; dropout masks stay one byte: f32 gives
// sb(66h + 9as).
TEST(Transformer, MemoryScalesWithDtype) {
  const int64_t s = 8, b = 2, h = 16, a = 4;
  const WorkloadSpec f32 =
      build_transformer(tiny(TransformerStyle::kGpt, 64, 4, true), 2, DType::kF32);
  EXPECT_EQ(f32.layers[1].paper_activation.b, s * b * (66 * h + 9 * a * s));
  EXPECT_EQ(f32.layers[1].paper_activation.w, 64 * s * b * h);
  // Without dropout every term is e bytes per element: 16 e sbh + e a s^2 b.
  const WorkloadSpec f64 =
      build_transformer(tiny(TransformerStyle::kGpt, 64, 4, false), 2, DType::kF64);
  EXPECT_EQ(f64.layers[1].paper_activation.b, 8 * (16 * s * b * h + a * s * s * b));
  // ppbench's kernels keep no dropout masks: the dropout flag changes only the paper's figure.
  const WorkloadSpec f32_plain =
      build_transformer(tiny(TransformerStyle::kGpt, 64, 4, false), 2, DType::kF32);
  EXPECT_EQ(f32.layers[1].activation.b, f32_plain.layers[1].activation.b);
  EXPECT_EQ(f32.layers[1].activation.w, f32_plain.layers[1].activation.w);
  EXPECT_NE(f32.layers[1].paper_activation.b, f32_plain.layers[1].paper_activation.b);
  // ... and every figure of theirs is e bytes per element.
  EXPECT_EQ(2 * f32_plain.layers[1].activation.b, f64.layers[1].activation.b);
  EXPECT_EQ(2 * f32_plain.layers[1].activation.w, f64.layers[1].activation.w);
}

// Llama layer, s = 8, b = 2, h = 16, a = 4, kv = 2 (head dim 4, h_kv = 8), f = 24, f32.
// Weights P = h(h + 2 h_kv) + h^2 + 3hf = 512 + 256 + 1152 = 1920.
// F = 2sbP + 4s^2bh = 61440 + 8192; I = 61440 + 16384; W = 61440.
// Paper: M_B = 4 [6sbh + 2sb h_kv + a s^2 b + 3sbf] = 4 [1536 + 256 + 512 + 1152] = 13824,
//        M_W = 4 sb [6h + 2h_kv + f + 2f] = 4 * 16 * 184 = 11776.
// ppbench's kernels add the norms' 1/rms per row to M_B (2sb = 32) and their gain gradients to
// M_W (2h = 32): 4 * (13824 / 4 + 32) = 13952 and 4 * (11776 / 4 + 32) = 11904.
TEST(Transformer, LlamaLayerByHand) {
  const WorkloadSpec spec =
      build_transformer(tiny(TransformerStyle::kLlama, 24, 2, false), 2, DType::kF32);
  ASSERT_EQ(spec.layers.size(), 4u);
  const LayerSpec& l = spec.layers[1];
  EXPECT_EQ(l.kind, LayerKind::kLlamaLayer);
  EXPECT_EQ(l.params, 1920 + 2 * 16);
  EXPECT_EQ(l.flops.f, 69632);
  EXPECT_EQ(l.flops.i, 77824);
  EXPECT_EQ(l.flops.w, 61440);
  EXPECT_EQ(l.paper_activation.b, 13824);
  EXPECT_EQ(l.paper_activation.w, 11776);
  EXPECT_EQ(l.activation.b, 13952);
  EXPECT_EQ(l.activation.w, 11904);

  const LayerSpec& emb = spec.layers.front();
  EXPECT_EQ(emb.kind, LayerKind::kEmbedding);
  EXPECT_EQ(emb.params, 32 * 16);
  EXPECT_EQ(emb.flops.total(), 0);
  EXPECT_EQ(emb.boundary_bytes(), 4 * 16 * 16);
  EXPECT_EQ(emb.activation.b, 4 * 16);             // token ids, one f32 each
  EXPECT_EQ(emb.activation.w, 4 * 16 * (1 + 16));  // ids and dY

  const LayerSpec& head = spec.layers.back();  // 2 sbhV = 2 * 16 * 16 * 32 each way
  EXPECT_EQ(head.kind, LayerKind::kLmHead);
  EXPECT_EQ(head.params, 32 * 16 + 16);
  EXPECT_EQ(head.flops.f, 16384);
  EXPECT_EQ(head.flops.i, 16384);
  EXPECT_EQ(head.flops.w, 16384);
  EXPECT_EQ(head.paper_activation.b, 4 * (2 * 16 * 16 + 16 * 32));
  // Norm rows and 1/rms, head input, probabilities, targets; then head input, dlogits, dgain.
  EXPECT_EQ(head.activation.b, 4 * 16 * (16 + 1 + 16 + 32 + 1));
  EXPECT_EQ(head.activation.w, 4 * (16 * (16 + 32) + 16));
  EXPECT_TRUE(head.boundary_out.empty());
}

TEST(Transformer, FlopsScaleWithMicrobatch) {
  const auto c = tiny(TransformerStyle::kLlama, 24, 2, false);
  const WorkloadSpec one = build_transformer(c, 1, DType::kF32);
  const WorkloadSpec four = build_transformer(c, 4, DType::kF32);
  EXPECT_EQ(4 * one.flops().total(), four.flops().total());
  EXPECT_EQ(4 * one.activation().b, four.activation().b);
  EXPECT_EQ(one.params(), four.params());
}

// b = 8, 20 -> 32 -> 32 -> 5. The first layer has no input gradient to compute.
TEST(Mlp, FlopsByHand) {
  MlpConfig c;
  c.layers = 3, c.width = 32, c.input_dim = 20, c.classes = 5;
  const WorkloadSpec spec = build_mlp(c, 8, DType::kF64);
  EXPECT_EQ(spec.layers[0].flops.f, 2 * 8 * 20 * 32);
  EXPECT_EQ(spec.layers[0].flops.i, 0);
  EXPECT_EQ(spec.layers[0].flops.w, 2 * 8 * 20 * 32);
  EXPECT_EQ(spec.layers[1].flops.i, 2 * 8 * 32 * 32);
  EXPECT_EQ(spec.layers[2].flops.f, 2 * 8 * 32 * 5);
  EXPECT_EQ(spec.layers[1].activation.b, 8 * 8 * (32 + 32));
  EXPECT_EQ(spec.layers[2].activation.b, 8 * 8 * (32 + 5 + 1));  // + the targets
  EXPECT_EQ(spec.layers[2].activation.w, 8 * 8 * (32 + 5));
  EXPECT_EQ(spec.layers[2].paper_activation.b, 8 * 8 * (32 + 5));
  EXPECT_EQ(spec.layers[0].boundary_bytes(), 8 * 8 * 32);
  EXPECT_EQ(spec.input.bytes, 8 * 8 * 20);
}

// AmoebaNet-D(3, 16) on 32-pixel images: stem to 4 channels at 16x16, cells c = 8, 16, 16, 32,
// 32, 64, 64 ... down to 1x1.
TEST(AmoebaNet, StructureAndBoundaries) {
  AmoebaNetConfig c;
  c.layers = 3, c.filters = 16, c.image_size = 32, c.classes = 10;
  const WorkloadSpec spec = build_amoebanet(c, 2, DType::kF32);
  ASSERT_EQ(spec.layers.size(), 9u);
  const char* names[] = {"stem",      "reduction0", "reduction1", "normal0.0", "reduction2",
                         "normal1.0", "reduction3", "normal2.0",  "classifier"};
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(spec.layers[i].name, names[i]);

  const LayerSpec& stem = spec.layers[0];  // 3 -> 4 channels, 3x3: 108 weights + 8 BN
  EXPECT_EQ(stem.params, 3 * 4 * 9 + 2 * 4);
  EXPECT_EQ(stem.flops.f, 2.0 * 2 * 3 * 4 * 9 * 16 * 16);
  EXPECT_EQ(stem.flops.i, 0);
  EXPECT_EQ(stem.boundary_bytes(), 4 * 2 * 4 * 16 * 16);

  // The first reduction cell (c = 8) outputs 3c = 24 channels at 8x8 and passes on its input.
  const LayerSpec& r0 = spec.layers[1];
  ASSERT_EQ(r0.boundary_out.size(), 2u);
  EXPECT_EQ(r0.boundary_out[0].shape, (std::vector<int64_t>{2, 24, 8, 8}));
  EXPECT_EQ(r0.boundary_out[1].shape, (std::vector<int64_t>{2, 4, 16, 16}));
  EXPECT_EQ(r0.flops.f, r0.flops.w);
  EXPECT_EQ(r0.flops.i, r0.flops.w);

  // Normal cells output 4c; the last one feeds only the classifier.
  const LayerSpec& n0 = spec.layers[3];
  EXPECT_EQ(n0.attrs.at("channels"), 16);
  EXPECT_EQ(n0.boundary_out[0].shape, (std::vector<int64_t>{2, 64, 4, 4}));
  const LayerSpec& last = spec.layers[7];
  ASSERT_EQ(last.boundary_out.size(), 1u);
  EXPECT_EQ(last.boundary_out[0].shape, (std::vector<int64_t>{2, 256, 1, 1}));
  const LayerSpec& cls = spec.layers[8];
  EXPECT_EQ(cls.params, 256 * 10 + 10);
  EXPECT_TRUE(cls.boundary_out.empty());
}

// The second normal cell of AmoebaNet-D(6, 16): c = 16 (q = c/4 = 4); its inputs are the first
// normal cell's output (4c = 64 channels) and the second reduction cell's (3c = 48), both
// preprocessed to c by ReLU-1x1 conv-BN; then three conv1x1 and two
// conv1x7-7x1 ops on c channels (pools and identities have no parameters).
TEST(AmoebaNet, NormalCellParamsByHand) {
  AmoebaNetConfig c;
  c.layers = 6, c.filters = 16, c.image_size = 32, c.classes = 10;
  const WorkloadSpec spec = build_amoebanet(c, 2, DType::kF32);
  const LayerSpec& second = spec.layers[4];
  EXPECT_EQ(second.name, "normal0.1");
  const int64_t pre = (64 * 16 + 32) + (48 * 16 + 32);
  const int64_t conv1x1 = 16 * 16 + 32;
  const int64_t conv17 = (16 * 4 + 8) + (4 * 4 * 7 + 8) + (4 * 4 * 7 + 8) + (4 * 16 + 32);
  EXPECT_EQ(second.params, pre + 3 * conv1x1 + 2 * conv17);
}

}  // namespace
}  // namespace ppbench
