// The workload spec's activation model against the CPU kernels: for every layer of tiny MLP,
// Llama and GPT workloads, Saved.bytes() after F, after I and after W of one micro-batch must be
// exactly spec.layers[i].activation.b, .w and 0. The executor's arena measures these same bytes
// and cpu_run's memory model predicts from these same fields, so this is what makes "measured peak
// activation bytes equal the memory model's prediction" hold layer by layer.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/backends/cpu/model_builder.h"
#include "workloads/amoebanet.h"
#include "workloads/cpu/amoebanet_cells.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench::cpu {
namespace {

struct Measured {
  std::int64_t after_f = 0, after_i = 0, after_w = 0;
};

constexpr std::uint64_t kSeed = 7;

// Runs one micro-batch through every layer (F in order, then I in reverse, then W), as one
// device would, and records each layer's Saved bytes after each pass.
template <typename T>
std::vector<Measured> measure(std::vector<PipelineLayerPtr<T>>& layers, const MicroBatch<T>& mb) {
  const std::size_t n = layers.size();
  MicroBatchData<T> data;
  data.inputs = &mb.inputs;
  data.targets = &mb.targets;
  data.loss_scale = T(1);

  std::vector<Saved<T>> saved(n);
  std::vector<Measured> out(n);
  Tensors<T> x;  // the first layer reads data.inputs and ignores this
  for (std::size_t i = 0; i < n; ++i) {
    x = layers[i]->forward(std::move(x), saved[i], data);
    out[i].after_f = saved[i].bytes();
  }
  Tensors<T> grad;  // the loss head seeds the backward itself
  for (std::size_t i = n; i-- > 0;) {
    grad = layers[i]->backward_input(std::move(grad), saved[i], data);
    out[i].after_i = saved[i].bytes();
  }
  for (std::size_t i = 0; i < n; ++i) {
    layers[i]->backward_weight(saved[i]);
    out[i].after_w = saved[i].bytes();
  }
  return out;
}

template <typename T>
void expect_model_matches_kernels(const WorkloadSpec& spec, std::vector<PipelineLayerPtr<T>> layers,
                                  const MicroBatch<T>& mb) {
  const std::vector<Measured> m = measure<T>(layers, mb);
  ASSERT_EQ(m.size(), spec.layers.size());
  for (std::size_t i = 0; i < m.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    SCOPED_TRACE("layer " + std::to_string(i) + " " + l.name + " (" +
                 std::string(layer_kind_name(l.kind)) + ", " + std::string(dtype_name(spec.dtype)) +
                 ")");
    // Guards against a vacuous pass: every layer keeps something between F and its backward.
    EXPECT_GT(m[i].after_f, 0);
    EXPECT_EQ(m[i].after_f, l.activation.b) << "M_B: bytes Saved holds after F";
    EXPECT_EQ(m[i].after_i, l.activation.w) << "M_W: bytes Saved holds after I";
    EXPECT_EQ(m[i].after_w, 0) << "W must empty Saved";
  }
}

// The layers and data as the CPU backend builds them.
template <typename T>
void expect_model_matches_kernels(const WorkloadSpec& spec) {
  std::vector<PipelineLayerPtr<T>> layers;
  for (std::size_t i = 0; i < spec.layers.size(); ++i)
    layers.push_back(make_pipeline_layer<T>(spec, i, kSeed));
  expect_model_matches_kernels<T>(spec, std::move(layers), make_microbatch<T>(spec, kSeed, 0));
}

WorkloadSpec tiny_mlp(DType dtype, std::int64_t layers) {
  MlpConfig c;
  c.layers = layers, c.width = 12, c.input_dim = 5, c.classes = 3;
  return build_mlp(c, 2, dtype);
}

// Small enough for a unit test, with every dimension distinct so that a term counted against
// the wrong size (h for h_kv, f for h, s for b) shows up.
WorkloadSpec tiny_transformer(const char* preset, DType dtype) {
  TransformerConfig c = transformer_preset(preset);
  c.layers = 2, c.hidden = 24, c.heads = 4, c.ffn = 40, c.vocab = 37, c.seq = 7;
  c.kv_heads = c.style == TransformerStyle::kLlama ? 2 : 4;
  return build_transformer(c, 2, dtype);
}

TEST(ActivationModel, MlpMatchesKernelsF64) {
  expect_model_matches_kernels<double>(tiny_mlp(DType::kF64, 4));
}
TEST(ActivationModel, MlpMatchesKernelsF32) {
  expect_model_matches_kernels<float>(tiny_mlp(DType::kF32, 4));
}
// A one-layer MLP: the loss head is also the first layer and reads the data.
TEST(ActivationModel, OneLayerMlpMatchesKernels) {
  expect_model_matches_kernels<double>(tiny_mlp(DType::kF64, 1));
}

TEST(ActivationModel, TinyLlamaMatchesKernelsF64) {
  expect_model_matches_kernels<double>(tiny_transformer("tiny-llama", DType::kF64));
}
TEST(ActivationModel, TinyLlamaMatchesKernelsF32) {
  expect_model_matches_kernels<float>(tiny_transformer("tiny-llama", DType::kF32));
}
TEST(ActivationModel, TinyGpipeMatchesKernelsF64) {
  expect_model_matches_kernels<double>(tiny_transformer("tiny-gpipe", DType::kF64));
}
TEST(ActivationModel, TinyGpipeMatchesKernelsF32) {
  expect_model_matches_kernels<float>(tiny_transformer("tiny-gpipe", DType::kF32));
}

// The presets as shipped (b = 2), so the model holds at the shapes the CLI runs by default.
TEST(ActivationModel, TinyPresetsAsShippedMatchKernels) {
  for (const char* preset : {"tiny-llama", "tiny-gpipe"}) {
    SCOPED_TRACE(preset);
    TransformerConfig c = transformer_preset(preset);
    c.layers = 1;
    expect_model_matches_kernels<float>(build_transformer(c, 2, DType::kF32));
  }
}

// AmoebaNet-D: the cells straight from workloads/cpu (the backend does not build them yet), on an
// NHWC image; targets from the backend's micro-batch maker.
template <typename T>
void expect_amoebanet_matches_kernels(DType dtype, std::int64_t layers_l) {
  AmoebaNetConfig c;
  c.layers = layers_l, c.filters = 16, c.image_size = 32, c.classes = 5;
  const WorkloadSpec spec = build_amoebanet(c, 2, dtype);
  std::vector<PipelineLayerPtr<T>> layers;
  for (std::size_t i = 0; i < spec.layers.size(); ++i)
    layers.push_back(make_amoebanet_layer<T>(spec.layers[i], derive_seed(kSeed, i)));
  MicroBatch<T> mb;
  mb.targets = make_microbatch<T>(spec, kSeed, 0).targets;
  Tensor<T> image({spec.microbatch_size, c.image_size, c.image_size, 3});
  Rng(kSeed).fill(image, -1.0, 1.0);
  mb.inputs.push_back(std::move(image));
  expect_model_matches_kernels<T>(spec, std::move(layers), mb);
}

TEST(ActivationModel, AmoebaNetMatchesKernelsF64) {
  expect_amoebanet_matches_kernels<double>(DType::kF64, 3);
}
// L = 6: two normal cells per group, so a normal cell follows a normal cell (s2 needs no
// preprocessing: the identity) as well as a reduction cell (factorized reduce).
TEST(ActivationModel, AmoebaNetMatchesKernelsF32) {
  expect_amoebanet_matches_kernels<float>(DType::kF32, 6);
}

// The GPT layer with dropout: the paper's figure counts masks, ppbench's kernels keep none, so
// the model the executor predicts from must not change with the flag.
TEST(ActivationModel, DropoutChangesOnlyThePaperFigure) {
  TransformerConfig c = transformer_preset("tiny-gpipe");
  c.layers = 1, c.dropout = true;
  const WorkloadSpec spec = build_transformer(c, 2, DType::kF64);
  expect_model_matches_kernels<double>(spec);
  EXPECT_GT(spec.layers[1].paper_activation.b, 0);
  EXPECT_NE(spec.layers[1].paper_activation.b, spec.layers[1].activation.b);
}

}  // namespace
}  // namespace ppbench::cpu
