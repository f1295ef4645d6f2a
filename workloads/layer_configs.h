// The shapes of the composite layers both kernel sets build (workloads/cpu/, workloads/cuda/):
// one definition each, so that the CPU and the CUDA layers of one spec are the same layers.
#pragma once

#include <cstdint>

namespace ppbench {

struct AttentionConfig {
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // divides heads; == heads is plain multi-head attention
  std::int64_t head_dim = 0;  // 0: hidden / heads
  bool bias = false;
  bool rope = true;
  double rope_theta = 10000.0;
};

// `c` with kv_heads and head_dim resolved from their defaults (heads; hidden / heads), refusing
// through `fail(ok, message)` (each kernel set's own error) the sizes no attention can have; each
// kernel set then adds what its own kernels need of head_dim.
template <typename Fail>
AttentionConfig resolve_attention(AttentionConfig c, Fail fail) {
  fail(c.hidden > 0 && c.heads > 0, "attention: hidden and heads must be positive");
  if (c.kv_heads == 0) c.kv_heads = c.heads;
  if (c.head_dim == 0) {
    fail(c.hidden % c.heads == 0, "attention: heads must divide hidden");
    c.head_dim = c.hidden / c.heads;
  }
  fail(c.kv_heads > 0 && c.heads % c.kv_heads == 0, "attention: kv_heads must divide heads");
  return c;
}

// Pre-norm transformer decoder layer:
//   h = x + Attention(Norm1(x));  y = h + FFN(Norm2(h))
// Llama: RMSNorm, rotary GQA without biases, SwiGLU. GPipe's Transformer: LayerNorm, multi-head
// attention with biases and no rotary embedding, GeLU MLP (linear-GeLU-linear with biases).
struct DecoderConfig {
  enum class Norm { kRMSNorm, kLayerNorm };
  enum class Ffn { kSwiGLU, kGeLU };
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // 0: heads
  std::int64_t head_dim = 0;  // 0: hidden / heads
  std::int64_t ffn = 0;
  Norm norm = Norm::kRMSNorm;
  Ffn ffn_kind = Ffn::kSwiGLU;
  bool bias = false;
  bool rope = true;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;

  // The layer's attention.
  AttentionConfig attention() const {
    AttentionConfig a;
    a.hidden = hidden;
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.head_dim = head_dim;
    a.bias = bias;
    a.rope = rope;
    a.rope_theta = rope_theta;
    return a;
  }

  // Llama's layer: RMSNorm, rotary attention with GQA, SwiGLU, no biases.
  static DecoderConfig llama(std::int64_t hidden, std::int64_t heads, std::int64_t kv_heads,
                             std::int64_t ffn) {
    DecoderConfig c;
    c.hidden = hidden;
    c.heads = heads;
    c.kv_heads = kv_heads;
    c.ffn = ffn;
    return c;
  }
  // GPipe's Transformer layer: LayerNorm, multi-head attention without rotary embeddings, GeLU,
  // biases.
  static DecoderConfig gpipe(std::int64_t hidden, std::int64_t heads, std::int64_t ffn) {
    DecoderConfig c;
    c.hidden = hidden;
    c.heads = heads;
    c.kv_heads = heads;
    c.ffn = ffn;
    c.norm = Norm::kLayerNorm;
    c.ffn_kind = Ffn::kGeLU;
    c.bias = true;
    c.rope = false;
    return c;
  }
};

// One AmoebaNet-D cell's place in the network (workloads/amoebanet_genotype.h has its ops).
struct AmoebaCellConfig {
  bool reduction = false;          // halves the size; its ops on states 0 and 1 have stride 2
  std::int64_t channels = 0;       // c: every state's channel count
  std::int64_t in_channels = 0;    // s1's channels (the previous cell's output)
  std::int64_t skip_channels = 0;  // s2's channels (the cell before that)
  bool reduction_prev = false;     // s2 is twice s1's size: preprocess it with a factorized reduce
  bool emits_skip = true;          // false for the last cell: the classifier reads only {out}
};

}  // namespace ppbench
