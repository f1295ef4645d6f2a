// Parameter counts against published figures and closed forms.
#include <cmath>

#include <gtest/gtest.h>

#include "workloads/amoebanet.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

TEST(Params, Llama3_8BIsExact) {
  // Meta's Llama 3 8B: 8,030,261,248 parameters (untied embeddings).
  const WorkloadSpec spec = build_transformer(transformer_preset("llama3-8b"), 1, DType::kBF16);
  EXPECT_EQ(spec.params(), 8030261248LL);
  EXPECT_EQ(spec.layers.size(), 34u);  // embedding, 32 decoder layers, head
  EXPECT_EQ(spec.layers[1].params, 218112000LL);
}

// GPT-style layer: QKV, projection, fc1, fc2 weights and biases, two LayerNorms:
// 12h^2 + 13h when f = 4h. Plus untied input and output embeddings and the final LayerNorm.
TEST(Params, GPipeTransformerByFormula) {
  for (int64_t layers : {3, 13, 48, 103}) {
    TransformerConfig c = transformer_preset("gpipe-transformer");
    c.layers = layers;
    const WorkloadSpec spec = build_transformer(c, 1, DType::kBF16);
    const int64_t h = 2048, v = 32000;
    EXPECT_EQ(spec.params(), layers * (12 * h * h + 13 * h) + 2 * v * h + 2 * h) << layers;
  }
}

// GPipe (arXiv 1811.06965) Table 1 lists Transformer-L sizes: L = 3 -> 282.2M, L = 13 ->
// 785.8M, L = 103 -> 5.3B, L = 415 -> 21.0B, L = 1663 -> 83.9B. These figures are quoted from the
// paper as we recall it (the search tool of this session could not show the table). Ours: 282.15M,
// 785.73M, 5.318B, 21.03B, 83.88B: within 0.35% (5.318B against the printed 5.3B is the largest
// gap; the paper rounds to two digits there). The
// fit pins the untied 32000-token embeddings: tied ones would give 216.6M for L = 3, a 32768-token
// vocabulary 285.3M.
TEST(Params, GPipeTransformerMatchesPublished) {
  struct Pub {
    int64_t layers;
    double params;
    double tolerance;
  };
  for (const Pub& p : {Pub{3, 282.2e6, 0.001}, Pub{13, 785.8e6, 0.001}, Pub{103, 5.3e9, 0.01},
                       Pub{415, 21.0e9, 0.005}, Pub{1663, 83.9e9, 0.001}}) {
    TransformerConfig c = transformer_preset("gpipe-transformer");
    c.layers = p.layers;
    const double ours = static_cast<double>(build_transformer(c, 1, DType::kBF16).params());
    EXPECT_LE(std::fabs(ours - p.params), p.tolerance * p.params)
        << "L=" << p.layers << " ours " << ours;
  }
}

// AmoebaNet-D(L, D). Published: GPipe Table 1 (Huang et al. 2019) gives 82M, 318M, 542M, 1.05B,
// 1.8B for (18,208), (18,416), (18,544), (36,544), (72,512); torchgpipe's reproduction of that
// table (kakaobrain/torchgpipe, benchmarks/amoebanetd-memory/README.md) counts 81.5M, 319.0M,
// 542.7M, 1.06B, 1.84B with the same genotype and concat [0, 3, 4, 6].
// Tolerance: 1% of the paper's figure or half a unit of its last printed digit, whichever is
// larger. Our counts (81,505,540; 319,024,120; 542,734,840; 1,055,832,376; 1,844,858,344) agree
// with torchgpipe's to every printed digit; the largest gap to the paper is 319.0M vs 318M
// (0.3%) and 1.056B vs 1.05B (0.6%), which we attribute to the paper's rounding or to TF
// implementation details (e.g. where BatchNorm shifts are dropped); the paper does not say.
struct AmoebaPub {
  int64_t layers, filters;
  double paper, paper_rounding, torchgpipe, torchgpipe_rounding;
};

TEST(Params, AmoebaNetDMatchesPublished) {
  const AmoebaPub pubs[] = {
      {18, 208, 82e6, 0.5e6, 81.5e6, 0.05e6},    {18, 416, 318e6, 0.5e6, 319.0e6, 0.05e6},
      {18, 544, 542e6, 0.5e6, 542.7e6, 0.05e6},  {36, 544, 1.05e9, 0.005e9, 1.06e9, 0.005e9},
      {72, 512, 1.8e9, 0.05e9, 1.84e9, 0.005e9},
  };
  for (const AmoebaPub& p : pubs) {
    AmoebaNetConfig c;
    c.layers = p.layers;
    c.filters = p.filters;
    const WorkloadSpec spec = build_amoebanet(c, 1, DType::kF32);
    const double ours = static_cast<double>(spec.params());
    EXPECT_LE(std::fabs(ours - p.paper), std::max(0.01 * p.paper, p.paper_rounding))
        << "AmoebaNet-D(" << p.layers << ", " << p.filters << "): ours " << ours;
    EXPECT_LE(std::fabs(ours - p.torchgpipe), p.torchgpipe_rounding)
        << "AmoebaNet-D(" << p.layers << ", " << p.filters << "): ours " << ours;
    EXPECT_EQ(spec.layers.size(), static_cast<std::size_t>(p.layers + 6));
  }
}

TEST(Params, AmoebaNetExactSmallCount) {
  // AmoebaNet-D(18, 208) counted by this structure, pinned so a change is noticed.
  AmoebaNetConfig c;
  c.layers = 18;
  c.filters = 208;
  EXPECT_EQ(build_amoebanet(c, 1, DType::kF32).params(), 81505540LL);
}

TEST(Params, MlpIsExact) {
  MlpConfig c;
  c.layers = 4;
  c.width = 32;
  c.input_dim = 20;
  c.classes = 5;
  const WorkloadSpec spec = build_mlp(c, 8, DType::kF64);
  ASSERT_EQ(spec.layers.size(), 4u);
  EXPECT_EQ(spec.params(), (20 * 32 + 32) + 2 * (32 * 32 + 32) + (32 * 5 + 5));
  EXPECT_EQ(spec.layers.back().kind, LayerKind::kClassifierLoss);
  EXPECT_TRUE(spec.layers.back().boundary_out.empty());
  c.layers = 1;  // a single layer is the loss head on the input
  EXPECT_EQ(build_mlp(c, 8, DType::kF64).params(), 20 * 5 + 5);
}

}  // namespace
}  // namespace ppbench
