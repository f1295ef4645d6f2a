// The small workloads the pipelined-step tests share (tests/backends, tests/mpi, tests/cuda_exec):
// eight partitionable layers each, so that every family fits at D = 4 with two stages per rank, and
// small enough that a test runs every schedule in well under a second.
#pragma once

#include "workloads/layer_spec.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench {

inline WorkloadSpec small_pipeline_mlp(DType dtype) {
  MlpConfig c;
  c.layers = 8;
  c.width = 12;
  c.input_dim = 7;
  c.classes = 5;
  return build_mlp(c, 3, dtype);
}

// `preset` gives the style (llama: RMSNorm, SwiGLU, grouped-query attention; gpt: LayerNorm,
// GeLU); the shape is the same small one for both.
inline WorkloadSpec small_pipeline_transformer(const char* preset, DType dtype) {
  TransformerConfig c = transformer_preset(preset);
  c.layers = 6;  // + embedding + head = 8 partitionable layers
  c.hidden = 16;
  c.ffn = 24;
  c.heads = 4;
  c.kv_heads = c.style == TransformerStyle::kLlama ? 2 : 4;
  c.vocab = 19;
  c.seq = 5;
  return build_transformer(c, 2, dtype);
}

}  // namespace ppbench
