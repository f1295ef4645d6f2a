// The device fills (workloads/cuda/init_fill.h) hold exactly what the CPU backend draws on the
// host: every parameter of Linear (transposed), Conv2d (transposed) and Embedding, in f32 and
// bf16, and every synthetic micro-batch (features, token ids, next-token targets, labels), bit
// for bit. Skips without a GPU.
#include <cmath>

#include <gtest/gtest.h>

#include "harness/backends/cpu/model_builder.h"
#include "tests/cuda/gpu_test_util.h"
#include "workloads/counter_rng.h"
#include "workloads/cuda/init_fill.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench::cuda::testing {
namespace {

class InitFill : public GpuTest {
 protected:
  // The CPU's value rounded to this dtype, as the device stores it.
  float expected(double v) const {
    const float f = static_cast<float>(v);
    return dtype() == DType::kBF16 ? round_to_bf16(f) : f;
  }
  template <class CpuParam>
  void expect_bitwise(const Param& g, const CpuParam& c) {
    const std::vector<float> got = download_cpu_layout(g, g.value);
    ASSERT_EQ(got.size(), c.value.data.size()) << g.name;
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], expected(c.value.data[i])) << g.name << " element " << i;
  }
};

TEST_P(InitFill, LinearConvAndEmbeddingHoldTheCpuValues) {
  const std::uint64_t seed = derive_seed(3, 9);
  Linear gl(*params_, 37, 19, true, dtype(), seed);
  cpu::Linear<double> cl(37, 19, true, seed);
  expect_bitwise(gl.weight, cl.weight);
  expect_bitwise(gl.bias, cl.bias);
  Conv2d gc(*params_, 5, 6, 3, 3, 1, dtype(), seed);
  cpu::Conv2d<double> cc(5, 6, 3, 3, 1, seed);
  expect_bitwise(gc.weight, cc.weight);
  Embedding ge(*params_, 41, 12, dtype(), seed);
  cpu::Embedding<double> ce(41, 12, seed);
  expect_bitwise(ge.table, ce.table);
}

TEST_P(InitFill, LargeTensorsUseEveryBlockOfTheGridStride) {
  // 70 M elements: more than 65535 blocks of 256 threads, so the grid-stride loop wraps.
  DeviceArena big("big params", std::size_t{600} << 20);
  Param p = make_param(big, "weight", {7000, 10000}, dtype());
  p.transposed = true;
  const std::uint64_t key = param_key(77, 0);
  fill_param(p, key, 0.5);
  const std::vector<float> v = download(p.value);
  for (std::size_t i = 0; i < v.size(); i += 9973) {  // a prime stride over the whole tensor
    const std::size_t r = i / 10000, c = i % 10000;
    ASSERT_EQ(v[i], expected(draw_symmetric(key, c * 7000 + r, 0.5))) << "element " << i;
  }
  ASSERT_EQ(v.back(), expected(draw_symmetric(key, 9999 * 7000 + 6999, 0.5)));
}

TEST_P(InitFill, MicroBatchesHoldTheCpuData) {
  TransformerConfig tc = transformer_preset("tiny-llama");
  tc.layers = 2, tc.hidden = 16, tc.ffn = 32, tc.heads = 2, tc.kv_heads = 1, tc.vocab = 97,
  tc.seq = 9;
  const WorkloadSpec t = build_transformer(tc, 3, ppbench::DType::kF32);
  MlpConfig mc;
  mc.layers = 2, mc.width = 8, mc.input_dim = 300, mc.classes = 11;
  const WorkloadSpec m = build_mlp(mc, 5, ppbench::DType::kF32);
  for (int mb : {0, 4}) {
    const DataKeys k = data_keys(123, mb);
    const cpu::MicroBatch<double> ct = cpu::make_microbatch<double>(t, 123, mb);
    DTensor ids(*acts_, {3, 9}, DType::kI32, "ids"), next(*acts_, {27}, DType::kI32, "targets");
    fill_tokens(ids, k, 97);
    fill_next_tokens(next, k, 9, 97);
    const std::vector<float> gi = download(ids), gn = download(next);
    for (std::size_t i = 0; i < gi.size(); ++i) {
      EXPECT_EQ(gi[i], ct.inputs.front().data[i]) << "token " << i;
      EXPECT_EQ(gn[i], static_cast<float>(ct.targets[i])) << "target " << i;
    }
    const cpu::MicroBatch<double> cm = cpu::make_microbatch<double>(m, 123, mb);
    DTensor x(*acts_, {5, 300}, dtype(), "features"), labels(*acts_, {5}, DType::kI32, "labels");
    fill_features(x, k);
    fill_labels(labels, k, 11);
    const std::vector<float> gx = download(x), gl = download(labels);
    for (std::size_t i = 0; i < gx.size(); ++i)
      ASSERT_EQ(gx[i], expected(cm.inputs.front().data[i])) << "feature " << i;
    for (std::size_t i = 0; i < gl.size(); ++i) EXPECT_EQ(gl[i], static_cast<float>(cm.targets[i]));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, InitFill, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return dtype_name(i.param);
                         });

}  // namespace
}  // namespace ppbench::cuda::testing
