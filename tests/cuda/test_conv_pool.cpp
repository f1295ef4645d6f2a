// AmoebaNet's GPU kernels (conv2d, batch norm, pools, concat/split and the ops built from them)
// against the CPU float64 kernels on random NHWC inputs with odd shapes, in f32 (relative error
// <= 1e-4) and bf16 (<= 2e-2). Skips without a GPU.
#include "tests/cuda/gpu_test_util.h"
#include "workloads/cpu/amoebanet_ops.h"
#include "workloads/cpu/batchnorm.h"
#include "workloads/cpu/concat.h"
#include "workloads/cpu/conv2d.h"
#include "workloads/cpu/pool.h"

namespace ppbench::cuda::testing {
namespace {

class ConvPool : public GpuTest {
 protected:
  // BatchNorm over an NHWC input whose last dimension is the channels, with random gamma and
  // beta drawn from `param_seed` and `param_seed + 1`.
  void check_batchnorm(const Shape& in, std::uint64_t param_seed, std::uint64_t input_seed) {
    const std::int64_t channels = in.back();
    BatchNorm g(*params_, channels, dtype());
    cpu::BatchNorm<double> c(channels);
    upload(g.gamma.value, random(channels, param_seed, 0.5, 1.5));
    upload(g.beta.value, random(channels, param_seed + 1, -0.5, 0.5));
    check_layer(g, c, in, input_seed);
  }
  void conv(std::int64_t cin, std::int64_t cout, std::int64_t kh, std::int64_t kw,
            std::int64_t stride, const Shape& in, std::uint64_t seed) {
    Conv2d g(*params_, cin, cout, kh, kw, stride, dtype(), seed);
    cpu::Conv2d<double> c(cin, cout, kh, kw, stride, seed);
    SCOPED_TRACE(std::to_string(kh) + "x" + std::to_string(kw) + " stride " +
                 std::to_string(stride));
    check_layer(g, c, in, seed);
  }
};

TEST_P(ConvPool, Conv1x1IsAGemm) { conv(13, 21, 1, 1, 1, {2, 5, 7, 13}, 1); }
TEST_P(ConvPool, Conv1x1Strided) { conv(12, 8, 1, 1, 2, {3, 7, 5, 12}, 2); }
TEST_P(ConvPool, Conv3x3) { conv(7, 11, 3, 3, 1, {2, 9, 6, 7}, 3); }
TEST_P(ConvPool, Conv3x3StridedOddImage) { conv(9, 10, 3, 3, 2, {2, 7, 9, 9}, 4); }
TEST_P(ConvPool, Conv1x7) { conv(6, 5, 1, 7, 1, {2, 5, 11, 6}, 5); }
TEST_P(ConvPool, Conv7x1SmallerImageThanKernel) { conv(5, 6, 7, 1, 1, {3, 4, 3, 5}, 6); }

TEST_P(ConvPool, WeightsMatchTheCpuDraw) {
  Conv2d g(*params_, 4, 3, 3, 3, 1, dtype(), 7);
  cpu::Conv2d<double> c(4, 3, 3, 3, 1, 7);
  const std::vector<float> w = download_cpu_layout(g.weight, g.weight.value);
  std::vector<double> ref(c.weight.value.data.begin(), c.weight.value.data.end());
  if (dtype() == DType::kBF16)
    for (double& v : ref) v = round_to_bf16(static_cast<float>(v));
  EXPECT_LE(rel_error(w, ref), 1e-7);
}

TEST_P(ConvPool, BatchNormPerMicroBatchStatistics) { check_batchnorm({3, 5, 7, 19}, 70, 8); }

TEST_P(ConvPool, BatchNormManyChannels) {
  BatchNorm g(*params_, 97, dtype());
  cpu::BatchNorm<double> c(97);
  upload(g.gamma.value, random(97, 72, 0.5, 1.5));
  check_layer(g, c, {2, 3, 3, 97}, 9);
}

// 4 x 16 x 16 = 1024 rows: the statistics are summed over four row blocks of 256 (one block
// alone in the cases above).
TEST_P(ConvPool, BatchNormOverSeveralRowBlocks) { check_batchnorm({4, 16, 16, 19}, 73, 10); }

TEST_P(ConvPool, MaxPool3x3) {
  MaxPool2d g(3, 1, 1);
  cpu::MaxPool2d<double> c(3, 1, 1);
  check_layer(g, c, {2, 7, 5, 6}, 10);
}

TEST_P(ConvPool, MaxPool3x3Strided) {
  MaxPool2d g(3, 2, 1);
  cpu::MaxPool2d<double> c(3, 2, 1);
  check_layer(g, c, {2, 9, 7, 5}, 11);
}

TEST_P(ConvPool, MaxPool2x2OddImage) {
  MaxPool2d g(2, 2, 0);
  cpu::MaxPool2d<double> c(2, 2, 0);
  check_layer(g, c, {3, 7, 5, 4}, 12);
}

TEST_P(ConvPool, AvgPool3x3CountsOnlyTheImage) {
  AvgPool2d g(3, 1, 1);
  cpu::AvgPool2d<double> c(3, 1, 1);
  check_layer(g, c, {2, 6, 5, 7}, 13);
}

TEST_P(ConvPool, AvgPool3x3Strided) {
  AvgPool2d g(3, 2, 1);
  cpu::AvgPool2d<double> c(3, 2, 1);
  check_layer(g, c, {2, 7, 9, 3}, 14);
}

TEST_P(ConvPool, GlobalAvgPool) {
  GlobalAvgPool g;
  cpu::GlobalAvgPool<double> c;
  check_layer(g, c, {3, 5, 7, 11}, 15);
}

TEST_P(ConvPool, ReluConvBnUnit) {
  LayerPtr g = make_relu_conv_bn(*params_, 8, 12, 3, 3, 2, dtype(), 16);
  cpu::LayerPtr<double> c = cpu::make_relu_conv_bn<double>(8, 12, 3, 3, 2, 16);
  check_layer(*g, *c, {2, 7, 6, 8}, 16);
}

TEST_P(ConvPool, AmoebaOps) {
  const struct {
    AmoebaOp op;
    std::int64_t stride;
  } cases[] = {{AmoebaOp::kConv1x1, 1},     {AmoebaOp::kConv3x3, 2},    {AmoebaOp::kConv3x3, 1},
               {AmoebaOp::kConv1x7_7x1, 1}, {AmoebaOp::kMaxPool3x3, 2}, {AmoebaOp::kMaxPool2x2, 2},
               {AmoebaOp::kAvgPool3x3, 1},  {AmoebaOp::kNone, 1}};
  std::uint64_t seed = 17;
  for (const auto& k : cases) {
    SCOPED_TRACE(std::string(cpu::amoeba_op_name(k.op)) + " stride " + std::to_string(k.stride));
    LayerPtr g = make_amoeba_op(*params_, k.op, 16, k.stride, dtype(), seed);
    cpu::LayerPtr<double> c = cpu::make_amoeba_op<double>(k.op, 16, k.stride, seed);
    check_layer(*g, *c, {2, 7, 5, 16}, seed++);
  }
}

TEST_P(ConvPool, ConcatAndSplitChannels) {
  const Shape a_shape{2, 3, 5, 7}, b_shape{2, 3, 5, 4}, c_shape{2, 3, 5, 9};
  const std::vector<float> av = random(shape_numel(a_shape), 20),
                           bv = random(shape_numel(b_shape), 21),
                           cv = random(shape_numel(c_shape), 22);
  DTensor a = device(av, a_shape, dtype()), b = device(bv, b_shape, dtype()),
          c = device(cv, c_shape, dtype());
  DTensor y = concat_channels(*ctx_, {&a, &b, &c});
  cpu::Tensor<double> ah = host(av, a_shape), bh = host(bv, b_shape), ch = host(cv, c_shape);
  cpu::Tensor<double> yc = cpu::concat_channels<double>({&ah, &bh, &ch});
  ASSERT_EQ(y.shape(), yc.shape);
  EXPECT_EQ(rel_error(download(y), yc.data), 0.0);  // copies are exact
  std::vector<DTensor> parts = split_channels(*ctx_, y, {7, 4, 9});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(download(parts[0]), av);
  EXPECT_EQ(download(parts[1]), bv);
  EXPECT_EQ(download(parts[2]), cv);
  EXPECT_THROW(split_channels(*ctx_, y, {7, 4}), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ConvPool, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return dtype_name(i.param);
                         });

}  // namespace
}  // namespace ppbench::cuda::testing
