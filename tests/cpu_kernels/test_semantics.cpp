// Layer-specific semantics the generic suite cannot see: the loss, joins and forks, the causal
// mask, per-micro-batch batch norm, pooling borders, exact Saved sizes.
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cpu_kernels/test_util.h"
#include "workloads/cpu/kernels.h"

namespace ppbench::cpu {
namespace {

using testing::dot;
using testing::random_tensor;
using testing::rel_error;

TEST(CrossEntropy, GradientMatchesFiniteDifferencesAndScales) {
  const Tensor<double> z = random_tensor({3, 5, 7}, 1, -2.0, 2.0);
  std::vector<std::int32_t> targets(15);
  for (std::size_t i = 0; i < targets.size(); ++i)
    targets[i] = static_cast<std::int32_t>(i * 5 % 7);
  SoftmaxCrossEntropy<double> ce;
  Saved<double> s;
  const double loss = ce.forward(z, targets, s);
  EXPECT_GT(s.bytes(), 0);
  const Tensor<double> dz = ce.backward_input(s, 0.5);
  EXPECT_EQ(s.bytes(), 0);

  // Reference loss written out directly.
  double ref = 0;
  for (std::int64_t r = 0; r < 15; ++r) {
    double sum = 0;
    for (std::int64_t c = 0; c < 7; ++c)
      sum += std::exp(z.data[static_cast<std::size_t>(r * 7 + c)]);
    ref += std::log(sum) -
           z.data[static_cast<std::size_t>(r * 7 + targets[static_cast<std::size_t>(r)])];
  }
  EXPECT_NEAR(loss, ref / 15, 1e-14);

  std::vector<double> num(z.data.size());
  Tensor<double> zp = z;
  const double eps = 1e-5;
  for (std::size_t i = 0; i < num.size(); ++i) {
    Saved<double> t;
    zp.data[i] = z.data[i] + eps;
    const double lp = ce.forward(zp, targets, t);
    zp.data[i] = z.data[i] - eps;
    const double lm = ce.forward(zp, targets, t);
    zp.data[i] = z.data[i];
    num[i] = 0.5 * (lp - lm) / (2 * eps);
  }
  const double err = rel_error(dz.data, num);
  std::printf("[ fd       ] cross_entropy          dlogits %.2e\n", err);
  EXPECT_LE(err, 1e-7);
}

TEST(CrossEntropy, RejectsBadTargets) {
  SoftmaxCrossEntropy<double> ce;
  Saved<double> s;
  EXPECT_THROW(ce.forward(random_tensor({2, 3}, 1), {0, 3}, s), std::invalid_argument);
  EXPECT_THROW(ce.forward(random_tensor({2, 3}, 1), {0}, s), std::invalid_argument);
}

TEST(Concat, SplitIsItsBackwardAndAddFansOut) {
  const Tensor<double> a = random_tensor({2, 3, 3, 2}, 1), b = random_tensor({2, 3, 3, 5}, 2);
  const Tensor<double> y = concat_channels<double>({&a, &b});
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{2, 3, 3, 7}));
  // L = sum(y * R) is linear, so its gradient is R split the same way.
  const Tensor<double> r = random_tensor(y.shape, 3);
  const std::vector<Tensor<double>> d = split_channels(r, {2, 5});
  EXPECT_NEAR(dot(y, r), dot(a, d[0]) + dot(b, d[1]), 1e-12);
  EXPECT_EQ(split_channels(y, {2, 5})[1].data, b.data);
  EXPECT_THROW(split_channels(r, {2, 4}), std::invalid_argument);
  EXPECT_EQ(add(a, a).data[3], 2 * a.data[3]);
}

TEST(Attention, IsCausal) {
  AttentionConfig cfg{6, 3, 1, 0, false, true, 10000.0};
  Attention<double> attn(cfg, 5);
  Tensor<double> x = random_tensor({1, 5, 6}, 1);
  Saved<double> s;
  const Tensor<double> y = attn.forward(x, s);
  // Changing the last token changes only the last output.
  for (std::int64_t c = 0; c < 6; ++c) x.data[static_cast<std::size_t>(4 * 6 + c)] += 1.0;
  const Tensor<double> y2 = attn.forward(x, s);
  for (std::size_t i = 0; i < 4 * 6; ++i) EXPECT_EQ(y.data[i], y2.data[i]);
  EXPECT_NE(y.data[4 * 6], y2.data[4 * 6]);
}

TEST(Attention, RejectsBadShapes) {
  EXPECT_THROW(Attention<double>(AttentionConfig{6, 4, 0, 0, false, true, 1e4}, 1),
               std::invalid_argument);  // heads do not divide hidden
  EXPECT_THROW(Attention<double>(AttentionConfig{6, 3, 2, 0, false, true, 1e4}, 1),
               std::invalid_argument);  // kv_heads do not divide heads
}

TEST(Rope, BackwardIsTheInverseRotation) {
  Tensor<double> x = random_tensor({2, 7, 12}, 1);
  Tensor<double> y = x;
  rope_rotate(y, 3, 4, 10000.0, false);
  EXPECT_GT(rel_error(y.data, x.data), 1e-2);  // positions > 0 do rotate
  rope_rotate(y, 3, 4, 10000.0, true);
  EXPECT_LE(rel_error(y.data, x.data), 1e-15);
}

// GPipe's semantics: statistics of the micro-batch at hand, so normalising two micro-batches
// separately differs from normalising them together, and each output is standardised.
TEST(BatchNorm, UsesPerMicroBatchStatistics) {
  BatchNorm<double> bn(3);
  const Tensor<double> x0 = random_tensor({2, 4, 4, 3}, 1, 0.0, 1.0);
  const Tensor<double> x1 = random_tensor({2, 4, 4, 3}, 2, 5.0, 9.0);
  Saved<double> s;
  const Tensor<double> y0 = bn.forward(x0, s);
  for (std::int64_t c = 0; c < 3; ++c) {
    double mean = 0, sq = 0;
    for (std::int64_t r = 0; r < 32; ++r) {
      const double v = y0.data[static_cast<std::size_t>(r * 3 + c)];
      mean += v / 32;
      sq += v * v / 32;
    }
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(sq, 1.0, 1e-3);  // eps = 1e-5 shrinks it a little
  }
  Tensor<double> both({4, 4, 4, 3});
  std::copy(x0.data.begin(), x0.data.end(), both.data.begin());
  std::copy(x1.data.begin(), x1.data.end(), both.data.begin() + 96);
  const Tensor<double> yb = bn.forward(both, s);
  EXPECT_GT(std::abs(yb.data[0] - y0.data[0]), 0.1);
}

TEST(AvgPool, ExcludesPaddingFromTheCount) {
  AvgPool2d<double> pool(3, 1, 1);
  Saved<double> s;
  const Tensor<double> y = pool.forward(Tensor<double>({1, 4, 5, 2}, 3.0), s);
  for (double v : y.data) EXPECT_DOUBLE_EQ(v, 3.0);  // corners too: padding is not averaged in
}

TEST(Pool, OutputSizesMatchAmoebaNetReductions) {
  Saved<double> s;
  const Tensor<double> x = random_tensor({1, 8, 8, 2}, 1);
  EXPECT_EQ(MaxPool2d<double>(2, 2, 0).forward(x, s).shape,
            MaxPool2d<double>(3, 2, 1).forward(x, s).shape);
  EXPECT_EQ(AvgPool2d<double>(3, 2, 1).forward(x, s).shape,
            (std::vector<std::int64_t>{1, 4, 4, 2}));
  EXPECT_EQ(Conv2d<double>(2, 2, 3, 3, 2, 1).forward(x, s).shape,
            (std::vector<std::int64_t>{1, 4, 4, 2}));
}

TEST(Linear, SavedHoldsExactlyTheGemmOperands) {
  Linear<double> lin(6, 4, true, 1);
  Saved<double> s;
  const Tensor<double> x = random_tensor({3, 5, 6}, 1);
  const Tensor<double> y = lin.forward(x, s);
  EXPECT_EQ(s.bytes(), x.bytes());
  lin.backward_input(random_tensor(y.shape, 2), s);
  EXPECT_EQ(s.bytes(), x.bytes() + y.bytes());  // W needs x and dy
  lin.backward_weight(s);
  EXPECT_EQ(s.bytes(), 0);
}

// What a Llama decoder layer keeps, in elements per token (rows = batch * seq), exactly:
//   M_B (after F): norm1 xhat + rstd (h + 1), attention x, q, k, v, P, o
//                  (h + nh d + 2 nkv d + nh s + nh d), norm2 (h + 1), SwiGLU x, gate|up, a (h + 3f)
//   M_W (after I): attention x, d qkv, o, dy (h + (nh + 2 nkv) d + nh d + h), SwiGLU x, d gate|up,
//                  a, dy (2h + 3f), plus the two norms' gamma gradients (2h per micro-batch).
// At a realistic ratio of sequence to hidden the s x s probabilities dominate M_B and go at I.
TEST(Decoder, SavedBytesMatchTheActivationModel) {
  const std::int64_t b = 2, s = 64, h = 32, nh = 4, nkv = 2, d = h / nh, f = 64;
  auto layer = make_decoder_layer<float>(DecoderConfig::llama(h, nh, nkv, f), 1);
  Saved<float> saved;
  const Tensor<float> y = layer->forward(testing::cast<float>(random_tensor({b, s, h}, 1)), saved);
  const std::int64_t mb = saved.bytes();
  layer->backward_input(testing::cast<float>(random_tensor(y.shape, 2)), saved);
  const std::int64_t mw = saved.bytes();
  std::printf("[ memory   ] decoder h32 s64: M_B %lld  M_W %lld bytes (%.2f)\n",
              static_cast<long long>(mb), static_cast<long long>(mw),
              static_cast<double>(mw) / static_cast<double>(mb));
  const std::int64_t rows = b * s, word = sizeof(float);
  EXPECT_EQ(mb,
            word * rows *
                ((h + 1) + (h + nh * d + 2 * nkv * d + nh * s + nh * d) + (h + 1) + (h + 3 * f)));
  EXPECT_EQ(mw, word * (rows * ((h + (nh + 2 * nkv) * d + nh * d + h) + (2 * h + 3 * f)) + 2 * h));
  EXPECT_LT(mw, mb);
}

TEST(Embedding, RepeatedTokensAccumulateRows) {
  Embedding<double> emb(4, 3, 1);
  Tensor<double> ids({1, 3});
  ids.data = {2, 2, 0};
  Saved<double> s;
  const Tensor<double> y = emb.forward(ids, s);
  EXPECT_EQ(y.data[0], emb.table.value.data[6]);
  emb.zero_grad();
  emb.backward(Tensor<double>(y.shape, 1.0), s);
  EXPECT_EQ(emb.table.grad.data[6], 2.0);
  EXPECT_EQ(emb.table.grad.data[0], 1.0);
  EXPECT_EQ(emb.table.grad.data[3], 0.0);
  ids.data[0] = 4;
  EXPECT_THROW(emb.forward(ids, s), std::invalid_argument);
}

TEST(Decoder, ParameterCountsAreThoseOfTheModels) {
  // Llama: 2 norms + q, k, v, o + gate, up, down.
  const std::int64_t h = 64, f = 96, nh = 8, nkv = 2, d = h / nh;
  auto llama = make_decoder_layer<float>(DecoderConfig::llama(h, nh, nkv, f), 1);
  EXPECT_EQ(llama->num_params(), 2 * h + h * (nh + 2 * nkv) * d + nh * d * h + 3 * h * f);
  // GPipe: 2 LayerNorms (gamma, beta), 4 h x h projections with biases, two MLP linears.
  auto gpipe = make_decoder_layer<float>(DecoderConfig::gpipe(h, nh, f), 1);
  EXPECT_EQ(gpipe->num_params(), 4 * h + 4 * (h * h + h) + h * f + f + f * h + h);
}

TEST(Init, DifferentSeedsGiveDifferentParameters) {
  Linear<double> a(4, 4, true, 1), b(4, 4, true, 2);
  EXPECT_NE(a.weight.value.data, b.weight.value.data);
}

}  // namespace
}  // namespace ppbench::cpu
