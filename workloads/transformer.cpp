#include "workloads/transformer.h"

#include <string>

#include "workloads/shape_check.h"

namespace ppbench {

void TransformerConfig::validate() const {
  require_positive("--layers", layers);
  require_positive("--hidden", hidden);
  require_positive("--ffn", ffn);
  require_positive("--heads", heads);
  require_positive("--kv-heads", kv_heads);
  require_positive("--vocab", vocab);
  require_positive("--seq", seq);
  if (hidden % heads != 0)
    throw UsageError("--heads " + std::to_string(heads) + " does not divide --hidden " +
                     std::to_string(hidden) + " (the head dimension must be an integer)");
  if (heads % kv_heads != 0)
    throw UsageError("--kv-heads " + std::to_string(kv_heads) + " does not divide --heads " +
                     std::to_string(heads) + " (each key/value head serves a whole group)");
  // GPipe's Transformer-L is plain multi-head attention, and so is its kernel.
  if (style == TransformerStyle::kGpt && kv_heads != heads)
    throw UsageError("--kv-heads " + std::to_string(kv_heads) +
                     " is not allowed for the GPipe-style "
                     "transformer (plain multi-head attention): it must equal --heads " +
                     std::to_string(heads));
  // Llama's rotary embeddings rotate pairs of a head's columns (i, i + d/2). The GPipe style has
  // none, but the CUDA attention moves every head between the token and the head-major layout
  // one such pair per thread whatever the style (workloads/cuda/attention.cu, permute_heads), so
  // an odd head dimension is refused for both: a spec must run on either backend.
  if (head_dim() % 2 != 0)
    throw UsageError(
        "--hidden " + std::to_string(hidden) + " / --heads " + std::to_string(heads) +
        " gives head dimension " + std::to_string(head_dim()) + ", which must be even: " +
        (style == TransformerStyle::kLlama
             ? "rotary embeddings rotate pairs of a head's columns"
             : "the CUDA attention moves each head's columns in pairs (GPipe-style layers have "
               "no rotary embeddings, but share that kernel)"));
}

namespace {

double d(int64_t v) { return static_cast<double>(v); }

// One decoder layer on a micro-batch of b sequences of s tokens (h hidden, f FFN, a query heads,
// h_kv = kv_heads * head_dim).
//
// FLOPs. Zero Bubble's GPT layer (f = 4h, h_kv = h): F = sbh(24h + 4s), I = sbh(24h + 8s),
// W = sbh(24h). Its 24sbh^2 is 2sb times the weight elements of the four products QKV (3h^2),
// output projection (h^2) and FFN (8h^2); its 4s^2bh is QK^T and PV (2s^2bh each; a heads of
// head_dim h/a, the full s x s square, as the paper counts it even though the mask is causal).
// Generalised:
//   P  = h (h + 2 h_kv) + h^2 + n_ffn h f        n_ffn = 3 (SwiGLU: gate, up, down) or 2 (GeLU)
//   F  = 2sb P + 4 s^2 b h
//   I  = 2sb P + 8 s^2 b h   (input gradients of every product; dS, dQ, dK, dV in attention)
//   W  = 2sb P               (weight gradients only; attention has no weights)
// which is exactly the paper's formula when f = 4h, h_kv = h, n_ffn = 2.
//
// Memory, e = dtype bytes, sb = s b rows; n = n_ffn (FFN-wide tensors kept per row), g = 1
// (RMSNorm: gain) or 2 (LayerNorm: gain and shift) vectors per norm.
//
// activation: what ppbench's kernels keep (workloads/cpu/blocks.cpp make_decoder_layer), in
// elements:
//   M_B = sb [ h + 1   norm-1: normalised input, 1/rms per row
//              h       QKV projection's input (norm-1 output)
//              h + 2 h_kv  Q, K, V (after rotary)
//              a s     softmax probabilities (a full s x s block per head, zero-filled mask)
//              h       output projection's input
//              h + 1   norm-2: normalised input, 1/rms per row
//              SwiGLU: h (gate/up input) + 2f (gate and up outputs) + f (down input)
//              GeLU:   h (fc1 input) + f (GeLU input) + f (fc2 input) ]
//       = sb (6h + 2 h_kv + n f + 2) + a s^2 b
//   M_W = sb [ (h) + (h + 2 h_kv)  QKV projection's input and output gradient
//              + h + h             output projection's input and output gradient
//              SwiGLU: h + 2f, f + h   GeLU: h + f, f + h  (each FFN product's x and dy) ]
//         + 2 g h                  the two norms' reduced scale/shift gradients, added in W
//       = sb (6h + 2 h_kv + n f) + 2 g h
//   I frees the probabilities, Q, K, V, the norms' saved rows and the FFN's element-wise inputs;
//   the kernels have no dropout (every schedule must compute the same step), so none is counted.
//
// paper_activation: Korthikanti et al.'s accounting, element by element:
//   M_B = e [ sbh   norm-1 input          sbh   QKV input (norm-1 output)
//             sbh   Q after rotary        2 sb h_kv  K after rotary, V
//             a s^2 b  softmax output     sbh   output-projection input
//             sbh   norm-2 input          sbh   FFN input (norm-2 output)
//             SwiGLU: 3 sbf (gate out, up out, down input)  GeLU: 2 sbf (GeLU input, fc2 input) ]
//         + dropout (GPT/Megatron layer): 1-byte masks on the attention probabilities (a s^2 b),
//           after the projection (sbh) and after the FFN (sbh), and the dropped probabilities
//           (e a s^2 b) that PV reads.
//   For the GPT layer at 16 bits this is sb(34h + 5as), Zero Bubble's M_B, and masks stay one byte
//   at other widths (so f32 gives sb(66h + 9as), not twice the 16-bit figure).
//   M_W = e sb [ inputs of the weighted products: h (QKV) + h (proj) + h (FFN in) + f (down)
//               + gradients of their outputs: (h + 2 h_kv) + h + n_up f + h ]
//   with n_up = 2 for SwiGLU (gate and up), 1 for GeLU: 32sbh at 16 bits for the GPT layer, the
//   paper's M_W. (The kernels keep the same products' x and dy, so their M_W differs only by the
//   norms' 2gh; their M_B by the 2sb saved 1/rms values, and by dropout.)
LayerSpec decoder_layer(const TransformerConfig& c, int64_t index, Size b, int e) {
  const bool llama = c.style == TransformerStyle::kLlama;
  const Size s = c.seq, h = c.hidden, f = c.ffn, a = c.heads, hkv = c.kv_hidden();
  const Size n_ffn = llama ? 3 : 2, n_up = llama ? 2 : 1;

  LayerSpec l;
  l.name = "layer" + std::to_string(index);
  l.kind = llama ? LayerKind::kLlamaLayer : LayerKind::kGptLayer;
  const Size weights = h * (h + 2 * hkv) + h * h + n_ffn * h * f;
  if (llama) {
    l.params = weights + 2 * h;  // two RMSNorm gains
  } else {
    // Biases on QKV, projection, fc1, fc2; two LayerNorms with gain and shift.
    l.params = weights + (h + 2 * hkv) + h + f + h + 4 * h;
  }
  const double mm = 2.0 * d(s) * d(b) * d(weights);
  const double att = d(s) * d(s) * d(b) * d(h);
  l.flops = {mm + 4 * att, mm + 8 * att, mm};

  const Size sb = s * b, probs = a * s * s * b;
  const Size g = llama ? 1 : 2;
  l.activation.b = e * (sb * (6 * h + 2 * hkv + n_ffn * f + 2) + probs);
  l.activation.w = e * (sb * (6 * h + 2 * hkv + n_ffn * f) + 2 * g * h);

  const Size kept = 6 * sb * h + 2 * sb * hkv + probs + n_ffn * sb * f;
  l.paper_activation.b = e * kept;
  if (c.dropout) l.paper_activation.b = e * kept + probs + 2 * sb * h + e * probs;
  l.paper_activation.w = e * sb * (6 * h + 2 * hkv + f + n_up * f);

  l.boundary_out.push_back({"hidden", {b, s, h}, e * sb * h});
  l.attrs = {{"hidden", h},
             {"ffn", f},
             {"heads", a},
             {"kv_heads", c.kv_heads},
             {"seq", s},
             {"head_dim", c.head_dim()},
             {"dropout", c.dropout ? 1 : 0}};
  if (llama) l.attrs["rope_theta"] = c.rope_theta;
  return l;
}

// Token lookup: no products. W scatters dY into the table, so dY is held from I to W; the token
// ids are what F keeps. ppbench's kernel stores the ids as values of the dtype:
//   M_B = e sb, M_W = e sb (1 + h).
// The paper-style figure counts them as int32: M_B = 4 sb, M_W = 4 sb + e sbh.
LayerSpec embedding(const TransformerConfig& c, Size b, int e) {
  const Size sb = c.seq * b;
  LayerSpec l;
  l.name = "embedding";
  l.kind = LayerKind::kEmbedding;
  l.params = Size(c.vocab) * c.hidden;
  l.activation = {e * sb, e * sb * (1 + c.hidden)};
  l.paper_activation = {4 * sb, 4 * sb + e * sb * c.hidden};
  l.boundary_out.push_back({"hidden", {b, c.seq, c.hidden}, e * sb * c.hidden});
  l.attrs = {{"vocab", c.vocab}, {"hidden", c.hidden}, {"seq", c.seq}};
  return l;
}

// Final norm, logits = X E_out^T, softmax cross-entropy: one product of 2sbhV each way.
// ppbench's kernels (norm, linear, cross-entropy; g = 1 for RMSNorm, 2 for LayerNorm):
//   M_B = e sb (h + 1   normalised input and 1/rms per row
//               + h     head input (norm output)
//               + V     softmax probabilities
//               + 1)    targets, one value of the dtype per token
//   M_W = e [sb (h + V) + g h]   head input and dlogits, the norm's reduced gradients
// The paper-style figure: M_B = e (2sbh + sbV) (norm input, head input, probabilities),
// M_W = e (sbh + sbV).
LayerSpec lm_head(const TransformerConfig& c, Size b, int e) {
  const bool llama = c.style == TransformerStyle::kLlama;
  const Size sb = c.seq * b, h = c.hidden, v = c.vocab;
  LayerSpec l;
  l.name = "lm_head";
  l.kind = LayerKind::kLmHead;
  l.params = v * h + (llama ? h : 2 * h);
  const double mm = 2.0 * d(sb) * d(h) * d(v);
  l.flops = {mm, mm, mm};
  const Size g = llama ? 1 : 2;
  l.activation = {e * sb * (2 * h + v + 2), e * (sb * (h + v) + g * h)};
  l.paper_activation = {e * (2 * sb * h + sb * v), e * (sb * h + sb * v)};
  l.attrs = {{"vocab", v}, {"hidden", h}, {"seq", c.seq}};
  return l;
}

}  // namespace

WorkloadSpec build_transformer(const TransformerConfig& cfg, int64_t microbatch_size, DType dtype) {
  cfg.validate();
  require_positive("--microbatch-size", microbatch_size);
  const Size b = microbatch_size;
  const int e = dtype_bytes(dtype);

  WorkloadSpec spec;
  spec.workload = "transformer";
  spec.config = {{"preset", cfg.preset},
                 {"style", cfg.style == TransformerStyle::kLlama ? "llama" : "gpt"},
                 {"layers", cfg.layers},
                 {"hidden", cfg.hidden},
                 {"ffn", cfg.ffn},
                 {"heads", cfg.heads},
                 {"kv_heads", cfg.kv_heads},
                 {"vocab", cfg.vocab},
                 {"seq", cfg.seq},
                 {"dropout", cfg.dropout}};
  spec.microbatch_size = b;
  spec.dtype = dtype;
  spec.input = {"tokens", {b, cfg.seq}, 4 * b * cfg.seq};
  spec.labels = {{"targets", {b, cfg.seq}, 4 * b * cfg.seq}};

  spec.layers.push_back(embedding(cfg, b, e));
  for (int64_t i = 0; i < cfg.layers; ++i) spec.layers.push_back(decoder_layer(cfg, i, b, e));
  spec.layers.push_back(lm_head(cfg, b, e));
  return spec;
}

}  // namespace ppbench
