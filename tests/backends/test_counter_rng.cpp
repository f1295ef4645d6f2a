// The generator behind every parameter and synthetic micro-batch (workloads/counter_rng.h,
// workloads/synthetic_data.h): Philox4x32-10 against Random123's published known-answer vectors,
// the ranges and exactness of the draws, and the CPU initialisation as a pure function of
// (key, element), which is what lets the CUDA backend fill the same tensors on the device.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "harness/backends/cpu/model_builder.h"
#include "workloads/counter_rng.h"
#include "workloads/cpu/linear.h"
#include "workloads/mlp.h"
#include "workloads/synthetic_data.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

struct Kat {
  Philox4x32 counter;
  std::uint32_t key[2];
  Philox4x32 expected;
};

// Random123's kat_vectors, "philox4x32 10" lines (counter words, key words, output words).
TEST(Philox, KnownAnswerVectors) {
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, {0, 0}, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       {0xffffffff, 0xffffffff},
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       {0xa4093822, 0x299f31d0},
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 got = philox4x32_10(k.counter, k.key[0], k.key[1]);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(got.v[w], k.expected.v[w]) << "word " << w;
  }
}

TEST(CounterRng, TwoElementsShareABlockAndEveryKeyIsItsOwnStream) {
  const Philox4x32 b = philox4x32_10({{3, 0, 0, 0}}, 7, 0);
  EXPECT_EQ(draw_bits(7, 6), (std::uint64_t{b.v[0]} << 32) | b.v[1]);
  EXPECT_EQ(draw_bits(7, 7), (std::uint64_t{b.v[2]} << 32) | b.v[3]);
  std::set<std::uint64_t> seen;
  for (std::uint64_t key : {1ull, 2ull, 1ull << 40})
    for (std::uint64_t i = 0; i < 1000; ++i) seen.insert(draw_bits(key, i));
  EXPECT_EQ(seen.size(), 3000u);
}

TEST(CounterRng, DrawsStayInTheirRangesOnExactGrids) {
  double lo = 1, hi = -1, sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = draw_unit(42, static_cast<std::uint64_t>(i));
    const double s = draw_symmetric(42, static_cast<std::uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_GE(s, -1.0);
    ASSERT_LT(s, 1.0);
    ASSERT_EQ(std::ldexp(s + 1.0, 52), std::floor(std::ldexp(s + 1.0, 52)));  // on the 2^-52 grid
    ASSERT_EQ(s, 2 * u - 1);                                                  // the same 53 bits
    lo = std::min(lo, s), hi = std::max(hi, s), sum += s;
  }
  EXPECT_LT(lo, -0.999);
  EXPECT_GT(hi, 0.999);
  EXPECT_LT(std::abs(sum / n), 0.01);
  std::vector<int> hits(7, 0);
  for (int i = 0; i < 70000; ++i) {
    const std::int32_t k = draw_below(9, static_cast<std::uint64_t>(i), 7);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 7);
    ++hits[static_cast<std::size_t>(k)];
  }
  for (int h : hits) EXPECT_NEAR(h, 10000, 500);
}

TEST(CounterRng, LayerParametersArePureFunctionsOfKeyAndElement) {
  const std::uint64_t seed = derive_seed(5, 3);
  cpu::Linear<float> f(6, 4, true, seed);
  cpu::Linear<double> d(6, 4, true, seed);
  const double a = 1.0 / std::sqrt(6.0);
  for (std::size_t i = 0; i < f.weight.value.data.size(); ++i) {
    EXPECT_EQ(d.weight.value.data[i], draw_symmetric(param_key(seed, 0), i, a));
    EXPECT_EQ(f.weight.value.data[i], static_cast<float>(d.weight.value.data[i]));
  }
  for (std::size_t i = 0; i < f.bias.value.data.size(); ++i)
    EXPECT_EQ(d.bias.value.data[i], draw_symmetric(param_key(seed, 1), i, a));
}

TEST(SyntheticData, MicroBatchesFollowTheDataFunctions) {
  TransformerConfig c = transformer_preset("tiny-llama");
  c.layers = 2, c.hidden = 16, c.ffn = 32, c.heads = 2, c.kv_heads = 1, c.vocab = 50, c.seq = 5;
  const WorkloadSpec t = build_transformer(c, 3, DType::kF32);
  const cpu::MicroBatch<float> mb = cpu::make_microbatch<float>(t, 11, 2);
  const DataKeys k = data_keys(11, 2);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t p = 0; p < 5; ++p) {
      const auto at = static_cast<std::size_t>(i * 5 + p);
      EXPECT_EQ(mb.inputs.front().data[at], static_cast<float>(data_token(k, i, p, 5, 50)));
      EXPECT_EQ(mb.targets[at], data_next_token(k, i, p, 5, 50));
      if (p + 1 < 5) {
        EXPECT_EQ(static_cast<float>(mb.targets[at]), mb.inputs.front().data[at + 1]);
      }
    }
  MlpConfig m;
  m.layers = 2, m.width = 8, m.input_dim = 6, m.classes = 4;
  const WorkloadSpec mlp = build_mlp(m, 3, DType::kF64);
  const cpu::MicroBatch<double> x = cpu::make_microbatch<double>(mlp, 11, 0);
  const DataKeys km = data_keys(11, 0);
  for (std::size_t e = 0; e < x.inputs.front().data.size(); ++e)
    EXPECT_EQ(x.inputs.front().data[e], data_feature(km, e));
  for (std::int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(x.targets[static_cast<std::size_t>(i)], data_label(km, i, 4));
  // Another micro-batch, another draw.
  EXPECT_NE(cpu::make_microbatch<double>(mlp, 11, 1).inputs.front().data, x.inputs.front().data);
}

}  // namespace
}  // namespace ppbench
