// The `transformer` workload: embedding, `layers` decoder layers, final norm + LM head +
// cross-entropy. Two layer styles:
//   llama: RMSNorm, causal grouped-query attention with rotary embeddings, SwiGLU FFN, no biases.
//   gpt:   LayerNorm, causal multi-head attention (no position embedding in the layer: GPipe's
//          sinusoidal positions are parameter-free, so counts agree), GeLU FFN, biases on every
//          linear; --kv-heads must equal --heads.
// Input and output embeddings are untied in both (Llama 3 unties them; GPipe's published
// Transformer-L sizes match only with two vocab x hidden matrices, see tests/workloads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/layer_spec.h"

namespace ppbench {

enum class TransformerStyle { kLlama, kGpt };

struct TransformerConfig {
  std::string preset;
  TransformerStyle style = TransformerStyle::kLlama;
  int64_t layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, vocab = 0, seq = 0;
  // Counts the dropout masks and dropout outputs of the GPT/Megatron layer in the memory model
  // (Korthikanti et al.'s 34sbh + 5as^2b includes them). Parameters and FLOPs do not change.
  bool dropout = false;
  // RoPE's base (the Llama style only): Llama 3 trained with 500000, Llama 2 with 10000.
  int64_t rope_theta = 10000;

  int64_t head_dim() const { return hidden / heads; }
  int64_t kv_hidden() const { return kv_heads * head_dim(); }
  // Throws UsageError naming the bad value.
  void validate() const;
};

// "llama3-8b", "gpipe-transformer", "tiny-llama", "tiny-gpipe"; UsageError otherwise.
TransformerConfig transformer_preset(std::string_view name);
std::vector<std::string> transformer_preset_names();

WorkloadSpec build_transformer(const TransformerConfig& cfg, int64_t microbatch_size, DType dtype);

}  // namespace ppbench
