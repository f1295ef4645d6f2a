// Every bad shape is a UsageError whose message names the value.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "workloads/amoebanet.h"
#include "workloads/layer_spec.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

void expect_usage(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no UsageError; expected one naming '" << needle << "'";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TransformerConfig llama() { return transformer_preset("tiny-llama"); }

TEST(BadShapes, Transformer) {
  auto build = [](TransformerConfig c) { build_transformer(c, 1, DType::kF32); };
  auto with = [](auto edit) {
    TransformerConfig c = llama();
    edit(c);
    return c;
  };
  expect_usage([&] { build(with([](auto& c) { c.heads = 5; })); }, "--heads 5");
  expect_usage([&] { build(with([](auto& c) { c.kv_heads = 3; })); }, "--kv-heads 3");
  expect_usage([&] { build(with([](auto& c) { c.hidden = 60, c.heads = 4, c.kv_heads = 4; })); },
               "head dimension 15");
  // Each style's own reason: Llama's rotary pairs; GPipe style has no rotary embeddings, and its
  // odd head dimension is refused for the CUDA attention's pairwise head layout.
  expect_usage([&] { build(with([](auto& c) { c.hidden = 60, c.heads = 4, c.kv_heads = 4; })); },
               "rotary embeddings rotate pairs");
  TransformerConfig gpt = transformer_preset("tiny-gpipe");
  gpt.hidden = 60;
  expect_usage([&] { build(gpt); }, "head dimension 15, which must be even: the CUDA attention");
  expect_usage([&] { build(with([](auto& c) { c.layers = 0; })); }, "--layers 0");
  expect_usage([&] { build(with([](auto& c) { c.hidden = -64; })); }, "--hidden -64");
  expect_usage([&] { build(with([](auto& c) { c.ffn = 0; })); }, "--ffn 0");
  expect_usage([&] { build(with([](auto& c) { c.vocab = 0; })); }, "--vocab 0");
  expect_usage([&] { build(with([](auto& c) { c.seq = -1; })); }, "--seq -1");
  expect_usage([&] { build(with([](auto& c) { c.heads = 0; })); }, "--heads 0");
  expect_usage([&] { build(with([](auto& c) { c.kv_heads = 0; })); }, "--kv-heads 0");
  expect_usage([&] { transformer_preset("gpt5"); }, "gpt5");
  expect_usage([&] { build_transformer(llama(), 0, DType::kF32); }, "--microbatch-size 0");
}

TEST(BadShapes, AmoebaNet) {
  auto with = [](auto edit) {
    AmoebaNetConfig c;
    edit(c);
    return [c] { build_amoebanet(c, 1, DType::kF32); };
  };
  expect_usage(with([](auto& c) { c.layers = 10; }), "--layers 10");
  expect_usage(with([](auto& c) { c.layers = 0; }), "--layers 0");
  expect_usage(with([](auto& c) { c.filters = 100; }), "--filters 100");
  expect_usage(with([](auto& c) { c.filters = -8; }), "--filters -8");
  expect_usage(with([](auto& c) { c.image_size = 100; }), "--image-size 100");
  expect_usage(with([](auto& c) { c.image_size = 16; }), "--image-size 16");
  expect_usage(with([](auto& c) { c.classes = 0; }), "--classes 0");
  // The last cells see (image / 32)^2 pixels: at 32 pixels and one sample, BatchNorm would
  // normalise a single value per channel.
  AmoebaNetConfig tiny;
  tiny.layers = 3, tiny.filters = 8, tiny.image_size = 32;
  expect_usage([&] { build_amoebanet(tiny, 1, DType::kF32); },
               "--image-size 32 with --microbatch-size 1");
  EXPECT_NO_THROW(build_amoebanet(tiny, 2, DType::kF32));
  tiny.image_size = 64;
  EXPECT_NO_THROW(build_amoebanet(tiny, 1, DType::kF32));
}

TEST(BadShapes, Mlp) {
  auto with = [](auto edit) {
    MlpConfig c;
    edit(c);
    return [c] { build_mlp(c, 1, DType::kF32); };
  };
  expect_usage(with([](auto& c) { c.layers = 0; }), "--layers 0");
  expect_usage(with([](auto& c) { c.width = -3; }), "--width -3");
  expect_usage(with([](auto& c) { c.input_dim = -1; }), "--input-dim -1");
  expect_usage(with([](auto& c) { c.classes = 0; }), "--classes 0");
}

TEST(BadShapes, Dtype) {
  expect_usage([] { parse_dtype("f16"); }, "f16");
}

}  // namespace
}  // namespace ppbench
