// A whole-model step on one GPU against the CPU float64 backend: a tiny Llama-shaped model
// (embedding, 2 decoder layers, final RMSNorm, LM head, softmax cross-entropy) built from the same
// seeds on both, every layer's F over each micro-batch, then I and W in reverse per micro-batch,
// gradients accumulated over the micro-batches. The loss (mean over micro-batches) and the global
// gradient norm must agree within the layer tolerances (f32 1e-4, bf16 2e-2), and in f32 every
// gradient tensor too. Skips without a GPU.
#include <cmath>

#include "tests/cuda/gpu_test_util.h"

namespace ppbench::cuda::testing {
namespace {

constexpr std::int64_t kVocab = 61, kHidden = 64, kHeads = 4, kKvHeads = 2, kFfn = 96;
constexpr std::int64_t kBatch = 2, kSeq = 13, kMicroBatches = 3;
constexpr std::uint64_t kSeed = 2024;

class ModelStep : public GpuTest {};

TEST_P(ModelStep, LossAndGradientNormMatchTheCpu) {
  const DecoderConfig dc = DecoderConfig::llama(kHidden, kHeads, kKvHeads, kFfn);
  std::vector<LayerPtr> g;
  std::vector<cpu::LayerPtr<double>> c;
  g.push_back(std::make_unique<Embedding>(*params_, kVocab, kHidden, dtype(), kSeed));
  c.push_back(std::make_unique<cpu::Embedding<double>>(kVocab, kHidden, kSeed));
  for (std::uint64_t l = 0; l < 2; ++l) {
    g.push_back(make_decoder_layer(*params_, dc, dtype(), cpu::derive_seed(kSeed, l + 1)));
    c.push_back(cpu::make_decoder_layer<double>(dc, cpu::derive_seed(kSeed, l + 1)));
  }
  g.push_back(std::make_unique<RMSNorm>(*params_, kHidden, dtype()));
  c.push_back(std::make_unique<cpu::RMSNorm<double>>(kHidden));
  g.push_back(std::make_unique<Linear>(*params_, kHidden, kVocab, false, dtype(), kSeed + 9));
  c.push_back(std::make_unique<cpu::Linear<double>>(kHidden, kVocab, false, kSeed + 9));
  const std::size_t layers = g.size();
  // Same seeds give the same draws; copying also hands the CPU the bf16-rounded values.
  for (std::size_t l = 0; l < layers; ++l) copy_params(*g[l], *c[l]);

  // Token ids and next-token targets per micro-batch, from the CPU's Rng.
  cpu::Rng rng(kSeed + 100);
  auto draw = [&] {
    std::vector<float> v(static_cast<std::size_t>(kBatch * kSeq));
    for (float& t : v) t = static_cast<float>(std::floor(rng.uniform() * kVocab));
    return v;
  };
  std::vector<std::vector<float>> ids, targets;
  for (std::int64_t m = 0; m < kMicroBatches; ++m) {
    ids.push_back(draw());
    targets.push_back(draw());
  }

  // F of every layer over every micro-batch (GPipe order), then the loss's forward.
  std::vector<std::vector<Saved>> sg(kMicroBatches, std::vector<Saved>(layers));
  std::vector<std::vector<cpu::Saved<double>>> sc(kMicroBatches,
                                                  std::vector<cpu::Saved<double>>(layers));
  std::vector<Saved> loss_sg(kMicroBatches);
  std::vector<cpu::Saved<double>> loss_sc(kMicroBatches);
  SoftmaxCrossEntropy ce_g;
  cpu::SoftmaxCrossEntropy<double> ce_c;
  std::vector<DTensor> losses;
  double loss_c = 0;
  for (std::int64_t m = 0; m < kMicroBatches; ++m) {
    DTensor x = device(ids[m], {kBatch, kSeq}, DType::kI32);
    cpu::Tensor<double> xc = host(ids[m], {kBatch, kSeq});
    for (std::size_t l = 0; l < layers; ++l) {
      x = g[l]->forward(*ctx_, x, sg[m][l]);
      xc = c[l]->forward(xc, sc[m][l]);
    }
    std::vector<std::int32_t> tc(targets[m].begin(), targets[m].end());
    losses.push_back(ce_g.forward(*ctx_, x.reshaped({kBatch * kSeq, kVocab}),
                                  device(targets[m], {kBatch * kSeq}, DType::kI32), loss_sg[m]));
    xc.shape = {kBatch * kSeq, kVocab};
    loss_c += ce_c.forward(xc, tc, loss_sc[m]) / kMicroBatches;
  }

  // I then W of every layer in reverse, per micro-batch; the loss is the mean over them.
  const double scale = 1.0 / kMicroBatches;
  for (std::int64_t m = 0; m < kMicroBatches; ++m) {
    DTensor dy = ce_g.backward_input(*ctx_, loss_sg[m], static_cast<float>(scale))
                     .reshaped({kBatch, kSeq, kVocab});
    cpu::Tensor<double> dyc = ce_c.backward_input(loss_sc[m], scale);
    dyc.shape = {kBatch, kSeq, kVocab};
    for (std::size_t l = layers; l-- > 0;) {
      dy = g[l]->backward_input(*ctx_, dy, sg[m][l]);
      g[l]->backward_weight(*ctx_, sg[m][l]);
      dyc = c[l]->backward_input(dyc, sc[m][l]);
      c[l]->backward_weight(sc[m][l]);
      EXPECT_EQ(sg[m][l].bytes(), 0) << g[l]->name() << ": Saved not emptied";
    }
  }

  double loss_g = 0;
  for (const DTensor& l : losses) loss_g += download(l)[0] / kMicroBatches;
  double square_g = 0, square_c = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    square_g += grad_square_sum(g[l]->params());
    square_c += grad_square_sum(c[l]->params());
  }
  expect_same_step(loss_g, square_g, loss_c, square_c, tol());
  // Tensor by tensor too: gradients swapped between layers, transposed or of the wrong sign keep
  // the norm. In f32; bf16's tensors against float64 are judged with the reference's own spread
  // (VirtualDeviceEquivalence, tests/common/reference_spread.h), and by the norm here.
  if (dtype() != DType::kF32) return;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::vector<Param*> gp = g[l]->params();
    const std::vector<cpu::Param<double>*> cp = c[l]->params();
    ASSERT_EQ(gp.size(), cp.size()) << g[l]->name();
    for (std::size_t k = 0; k < gp.size(); ++k)
      EXPECT_LE(rel_error(download_cpu_layout(*gp[k], gp[k]->grad), cp[k]->grad.data), tol())
          << g[l]->name() << " " << gp[k]->name;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ModelStep, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return dtype_name(i.param);
                         });

}  // namespace
}  // namespace ppbench::cuda::testing
