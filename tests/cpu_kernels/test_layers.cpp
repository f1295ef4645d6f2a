// Every layer type and composite block, in one parameterised suite: finite-difference gradients
// of I and W (float64), the I/W split, accumulation over micro-batches, the Saved memory model,
// deterministic initialisation, and float32 against float64.
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cpu_kernels/test_util.h"
#include "workloads/cpu/kernels.h"

namespace ppbench::cpu {
namespace {

using testing::cast;
using testing::check_gradients;
using testing::perturb_params;
using testing::random_ids;
using testing::random_tensor;
using testing::rel_error;

// What Saved must look like after I (after W it is always empty).
enum class Memory {
  kFreedByI,      // no parameters: I frees everything
  kShrinksAtI,    // I frees more than it keeps for W (norms, attention, decoder layers)
  kGemmOperands,  // W needs each GEMM's x and dy, so after I Saved is not smaller than after F
};

struct LayerCase {
  std::string name;
  std::vector<std::int64_t> in_shape;
  Memory memory;
  std::function<LayerPtr<double>()> make64;
  std::function<LayerPtr<float>()> make32;
  std::int64_t vocab = 0;  // > 0: the input is token ids below vocab (no input gradient)
};

// gtest prints the case by name, not as bytes.
void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

template <typename F>
LayerCase make_case(std::string name, std::vector<std::int64_t> shape, Memory memory, F f,
                    std::int64_t vocab = 0) {
  return {std::move(name),
          std::move(shape),
          memory,
          [f] { return f(double{}); },
          [f] { return f(float{}); },
          vocab};
}

// `expr` builds a Layer<T>; T is float or double.
#define LAYER(expr)                         \
  [](auto tag) -> LayerPtr<decltype(tag)> { \
    using T = decltype(tag);                \
    return expr;                            \
  }

constexpr std::int64_t kB = 3, kS = 5, kH = 6;  // batch, seq, hidden: small and odd-ish

DecoderConfig llama_tiny() { return DecoderConfig::llama(kH, 3, 1, 8); }
DecoderConfig gpipe_tiny() { return DecoderConfig::gpipe(kH, 3, 7); }
AttentionConfig gqa_tiny() { return {kH, 3, 1, 0, false, true, 10000.0}; }
AttentionConfig mha_bias_tiny() { return {kH, 3, 3, 0, true, false, 10000.0}; }
// Two key/value heads of two query heads each: with one key/value head (gqa_tiny) every query
// head maps to group 0, so a wrong head -> group mapping would pass.
AttentionConfig gqa_two_groups() { return {8, 4, 2, 0, false, true, 10000.0}; }
AttentionConfig wide_heads() { return {kH, 3, 1, 4, false, true, 500000.0}; }  // 3 * 4 != 6

std::vector<LayerCase> all_cases() {
  const std::vector<std::int64_t> tok = {kB, kS, kH};
  const std::vector<std::int64_t> img = {2, 5, 6, 3};  // NHWC
  return {
      make_case("linear_bias", tok, Memory::kGemmOperands,
                LAYER(std::make_unique<Linear<T>>(kH, 5, true, 11))),
      make_case("linear_nobias", tok, Memory::kGemmOperands,
                LAYER(std::make_unique<Linear<T>>(kH, 7, false, 12))),
      make_case("gelu", tok, Memory::kFreedByI, LAYER(std::make_unique<GeLU<T>>())),
      make_case("relu", tok, Memory::kFreedByI, LAYER(std::make_unique<ReLU<T>>())),
      make_case("layernorm", tok, Memory::kShrinksAtI, LAYER(std::make_unique<LayerNorm<T>>(kH))),
      make_case("rmsnorm", tok, Memory::kShrinksAtI, LAYER(std::make_unique<RMSNorm<T>>(kH))),
      make_case("rope", {kB, kS, 8}, Memory::kFreedByI,
                LAYER(std::make_unique<RotaryEmbedding<T>>(2, 4))),
      make_case("attention_gqa_rope", tok, Memory::kShrinksAtI,
                LAYER(std::make_unique<Attention<T>>(gqa_tiny(), 13))),
      make_case("attention_gqa_two_groups", {kB, kS, 8}, Memory::kShrinksAtI,
                LAYER(std::make_unique<Attention<T>>(gqa_two_groups(), 31))),
      make_case("attention_mha_bias", tok, Memory::kShrinksAtI,
                LAYER(std::make_unique<Attention<T>>(mha_bias_tiny(), 14))),
      make_case("attention_head_dim_4", tok, Memory::kShrinksAtI,
                LAYER(std::make_unique<Attention<T>>(wide_heads(), 15))),
      make_case("swiglu", tok, Memory::kGemmOperands,
                LAYER(std::make_unique<SwiGLU<T>>(kH, 8, 16))),
      make_case("embedding", {kB, kS}, Memory::kGemmOperands,
                LAYER(std::make_unique<Embedding<T>>(7, kH, 17)), 7),
      make_case(
          "residual_linear", tok, Memory::kGemmOperands,
          LAYER(std::make_unique<Residual<T>>(std::make_unique<Linear<T>>(kH, kH, true, 18)))),
      make_case("mlp_block", tok, Memory::kGemmOperands, LAYER(make_mlp_block<T>(kH, 7, 19))),
      make_case("decoder_llama", tok, Memory::kShrinksAtI,
                LAYER(make_decoder_layer<T>(llama_tiny(), 20))),
      make_case("decoder_gpipe", tok, Memory::kShrinksAtI,
                LAYER(make_decoder_layer<T>(gpipe_tiny(), 21))),
      make_case("batchnorm", img, Memory::kShrinksAtI, LAYER(std::make_unique<BatchNorm<T>>(3))),
      make_case("conv1x1", img, Memory::kGemmOperands,
                LAYER(std::make_unique<Conv2d<T>>(3, 4, 1, 1, 1, 22))),
      make_case("conv1x1_stride2", img, Memory::kGemmOperands,
                LAYER(std::make_unique<Conv2d<T>>(3, 2, 1, 1, 2, 23))),
      make_case("conv3x3", img, Memory::kGemmOperands,
                LAYER(std::make_unique<Conv2d<T>>(3, 4, 3, 3, 1, 24))),
      make_case("conv3x3_stride2", img, Memory::kGemmOperands,
                LAYER(std::make_unique<Conv2d<T>>(3, 4, 3, 3, 2, 25))),
      make_case("conv1x7", img, Memory::kGemmOperands,
                LAYER(std::make_unique<Conv2d<T>>(3, 2, 1, 7, 1, 26))),
      make_case("conv7x1", img, Memory::kGemmOperands,
                LAYER(std::make_unique<Conv2d<T>>(3, 2, 7, 1, 1, 27))),
      make_case("maxpool3x3", img, Memory::kFreedByI,
                LAYER(std::make_unique<MaxPool2d<T>>(3, 1, 1))),
      make_case("maxpool3x3_stride2", img, Memory::kFreedByI,
                LAYER(std::make_unique<MaxPool2d<T>>(3, 2, 1))),
      make_case("maxpool2x2", img, Memory::kFreedByI,
                LAYER(std::make_unique<MaxPool2d<T>>(2, 2, 0))),
      make_case("avgpool3x3", img, Memory::kFreedByI,
                LAYER(std::make_unique<AvgPool2d<T>>(3, 1, 1))),
      make_case("avgpool3x3_stride2", img, Memory::kFreedByI,
                LAYER(std::make_unique<AvgPool2d<T>>(3, 2, 1))),
      make_case("global_avgpool", img, Memory::kFreedByI,
                LAYER(std::make_unique<GlobalAvgPool<T>>())),
      // AmoebaNet's basic op: ReLU-conv-BN.
      make_case("relu_conv_bn", img, Memory::kShrinksAtI, LAYER([] {
                  auto s = std::make_unique<Sequential<T>>("relu_conv_bn");
                  s->add(std::make_unique<ReLU<T>>());
                  s->add(std::make_unique<Conv2d<T>>(3, 4, 3, 3, 1, 28));
                  s->add(std::make_unique<BatchNorm<T>>(4));
                  return LayerPtr<T>(std::move(s));
                }())),
  };
}

class LayerTest : public ::testing::TestWithParam<LayerCase> {
 protected:
  Tensor<double> input(std::uint64_t seed) const {
    const LayerCase& c = GetParam();
    if (c.vocab > 0) return random_ids(c.in_shape, c.vocab, seed);
    return random_tensor(c.in_shape, seed);
  }
};

TEST_P(LayerTest, GradientsMatchFiniteDifferences) {
  const LayerCase& c = GetParam();
  LayerPtr<double> layer = c.make64();
  perturb_params(*layer, 99);
  const testing::GradErrors e = check_gradients(*layer, input(1), c.vocab == 0);
  std::printf("[ fd       ] %-22s dx %.2e  dparams %.2e\n", c.name.c_str(), e.input, e.params);
  EXPECT_LE(e.input, 1e-7) << "input gradient (I)";
  EXPECT_LE(e.params, 1e-7) << "parameter gradients (W)";
}

// B = I then W, and passes of two micro-batches may interleave as a pipeline schedule runs them.
TEST_P(LayerTest, SplitPassesInterleaveAndAccumulate) {
  LayerPtr<double> layer = GetParam().make64();
  perturb_params(*layer, 98);
  const Tensor<double> x0 = input(2), x1 = input(3);

  // Reference: each micro-batch alone, with the full backward.
  auto grads_of = [&](const std::vector<const Tensor<double>*>& xs) {
    layer->zero_grad();
    for (const Tensor<double>* x : xs) {
      Saved<double> s;
      Tensor<double> y = layer->forward(*x, s);
      layer->backward(random_tensor(y.shape, 50), s);
    }
    std::vector<std::vector<double>> g;
    for (Param<double>* p : layer->params())
      g.emplace_back(p->grad.data.begin(), p->grad.data.end());
    return g;
  };
  const auto g0 = grads_of({&x0}), g1 = grads_of({&x1}), g01 = grads_of({&x0, &x1});

  // A zero-bubble-like order: F0 F1 I1 I0 W0 W1.
  layer->zero_grad();
  Saved<double> s0, s1;
  Tensor<double> y0 = layer->forward(x0, s0);
  Tensor<double> y1 = layer->forward(x1, s1);
  Tensor<double> dx1 = layer->backward_input(random_tensor(y1.shape, 50), s1);
  Tensor<double> dx0 = layer->backward_input(random_tensor(y0.shape, 50), s0);
  layer->backward_weight(s0);
  layer->backward_weight(s1);

  std::vector<Param<double>*> ps = layer->params();
  for (std::size_t k = 0; k < ps.size(); ++k) {
    // W accumulates: the two micro-batches' gradients add up (bitwise: same order of sums).
    EXPECT_EQ(std::vector<double>(ps[k]->grad.data.begin(), ps[k]->grad.data.end()), g01[k])
        << ps[k]->name;
    std::vector<double> sum(g0[k].size());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = g0[k][i] + g1[k][i];
    EXPECT_LE(rel_error(ps[k]->grad.data, sum), 1e-14) << ps[k]->name;
  }
  // I then W gives B's input gradient.
  Saved<double> s;
  Tensor<double> y = layer->forward(x1, s);
  EXPECT_EQ(layer->backward(random_tensor(y.shape, 50), s).data, dx1.data);
  EXPECT_EQ(s.bytes(), 0);
}

TEST_P(LayerTest, SavedBytesFollowTheMemoryModel) {
  const LayerCase& c = GetParam();
  LayerPtr<double> layer = c.make64();
  Saved<double> s;
  Tensor<double> y = layer->forward(input(4), s);
  const std::int64_t after_f = s.bytes();
  layer->backward_input(random_tensor(y.shape, 5), s);
  const std::int64_t after_i = s.bytes();
  layer->backward_weight(s);
  const std::int64_t after_w = s.bytes();
  std::printf("[ memory   ] %-22s after F %6lld  after I %6lld  after W %lld bytes\n",
              c.name.c_str(), static_cast<long long>(after_f), static_cast<long long>(after_i),
              static_cast<long long>(after_w));
  EXPECT_EQ(after_w, 0);
  switch (c.memory) {
    case Memory::kFreedByI:
      EXPECT_TRUE(layer->params().empty());
      EXPECT_EQ(after_i, 0);
      break;
    case Memory::kShrinksAtI:
      EXPECT_GT(after_i, 0);
      EXPECT_LT(after_i, after_f);
      break;
    case Memory::kGemmOperands:
      EXPECT_GE(after_i, after_f);
      break;
  }
}

TEST_P(LayerTest, InitialisationIsDeterministic) {
  LayerPtr<double> a = GetParam().make64(), b = GetParam().make64();
  std::vector<Param<double>*> pa = a->params(), pb = b->params();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t k = 0; k < pa.size(); ++k) EXPECT_EQ(pa[k]->value.data, pb[k]->value.data);
}

TEST_P(LayerTest, Float32MatchesFloat64) {
  LayerPtr<double> ld = GetParam().make64();
  LayerPtr<float> lf = GetParam().make32();
  std::vector<Param<double>*> pd = ld->params();
  std::vector<Param<float>*> pf = lf->params();
  ASSERT_EQ(pd.size(), pf.size());
  // Same seed, values drawn in double: the float model is the double model rounded.
  for (std::size_t k = 0; k < pd.size(); ++k) {
    EXPECT_LE(rel_error(pf[k]->value.data, pd[k]->value.data), 1e-7) << pd[k]->name;
  }
  const Tensor<double> xd = input(6);
  Saved<double> sd;
  Saved<float> sf;
  const Tensor<double> yd = ld->forward(xd, sd);
  const Tensor<float> yf = lf->forward(cast<float>(xd), sf);
  ASSERT_EQ(yd.shape, yf.shape);
  EXPECT_LE(rel_error(yf.data, yd.data), 1e-4) << "forward";

  const Tensor<double> r = random_tensor(yd.shape, 7);
  const Tensor<double> dxd = ld->backward(r, sd);
  const Tensor<float> dxf = lf->backward(cast<float>(r), sf);
  EXPECT_LE(rel_error(dxf.data, dxd.data), 1e-4) << "input gradient";
  for (std::size_t k = 0; k < pd.size(); ++k) {
    EXPECT_LE(rel_error(pf[k]->grad.data, pd[k]->grad.data), 1e-4) << pd[k]->name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllLayers, LayerTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& param) {
                           return param.param.name;
                         });

// A diverged run's NaN reaches a max-pool: the output is NaN, as in PyTorch, and the backward
// hands each output's gradient to a position inside the image (a border window of NaN once
// named its padding corner, and the backward wrote before the start of dx).
TEST(MaxPool, NaNWinsAndItsGradientLandsInsideTheImage) {
  MaxPool2d<double> pool(3, 1, 1);
  Tensor<double> x({1, 4, 4, 1});
  for (double& v : x.data) v = std::numeric_limits<double>::quiet_NaN();
  x.data[5] = 2.0;  // one number among the NaN: it never wins over them
  Saved<double> saved;
  const Tensor<double> y = pool.forward(x, saved);
  for (double v : y.data) EXPECT_TRUE(std::isnan(v));
  Tensor<double> dy(y.shape);
  for (double& v : dy.data) v = 1.0;
  const Tensor<double> dx = pool.backward_input(dy, saved);
  double sum = 0;
  for (double v : dx.data) sum += v;
  EXPECT_EQ(sum, 16.0);  // every output's gradient, none lost to the padding
  EXPECT_EQ(dx.data[5], 0.0);
}

}  // namespace
}  // namespace ppbench::cpu
