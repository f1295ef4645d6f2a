// Transformer presets. Shapes from the papers (docs/papers.md); the tiny ones are for tests and CPU
// runs.
#include <string>
#include <vector>

#include "core/error.h"
#include "workloads/transformer.h"

namespace ppbench {

namespace {

TransformerConfig make(const char* name, TransformerStyle style, int64_t layers, int64_t hidden,
                       int64_t ffn, int64_t heads, int64_t kv_heads, int64_t vocab, int64_t seq,
                       bool dropout) {
  TransformerConfig c;
  c.preset = name;
  c.style = style;
  c.layers = layers, c.hidden = hidden, c.ffn = ffn, c.heads = heads, c.kv_heads = kv_heads;
  c.vocab = vocab, c.seq = seq, c.dropout = dropout;
  return c;
}

TransformerConfig with_rope_theta(TransformerConfig c, int64_t theta) {
  c.rope_theta = theta;
  return c;
}

const std::vector<TransformerConfig>& presets() {
  using S = TransformerStyle;
  static const std::vector<TransformerConfig> all = {
      // Llama 3 8B; seq is its 8192-token training context, RoPE's base its 500000.
      with_rope_theta(make("llama3-8b", S::kLlama, 32, 4096, 14336, 32, 8, 128256, 8192, false),
                      500000),
      // GPipe's Transformer-L with L = 48, the depth of its Table 2 (Transformer-48); a
      // Megatron-style layer with dropout, so the memory model is Zero Bubble's M_B.
      make("gpipe-transformer", S::kGpt, 48, 2048, 8192, 32, 32, 32000, 1024, true),
      // Small enough for float64 finite differences and CPU pipelines; no dropout, so every
      // schedule computes the same step bit for bit.
      make("tiny-llama", S::kLlama, 4, 64, 128, 4, 2, 256, 32, false),
      make("tiny-gpipe", S::kGpt, 4, 64, 256, 4, 4, 256, 32, false),
  };
  return all;
}

}  // namespace

std::vector<std::string> transformer_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.preset);
  return names;
}

TransformerConfig transformer_preset(std::string_view name) {
  std::string known;
  for (const auto& p : presets()) {
    if (p.preset == name) return p;
    known += (known.empty() ? "" : ", ") + p.preset;
  }
  throw UsageError("unknown --preset " + quoted(name) + " (known: " + known + ")");
}

}  // namespace ppbench
