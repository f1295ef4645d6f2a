// Causal grouped-query self-attention on [batch, seq, hidden], as cpu::Attention (same config,
// same fused q | k | v projection, rotate-half RoPE, W stored [out, in]).
//
// FIRST-STEP IMPLEMENTATION: the s x s scores are materialised. Per (batch, kv group) one strided
// batched cuBLASLt GEMM computes the scores of the group's heads against their shared k (the
// heads of a group are adjacent in the head-major layout, so GQA needs no copy of k or v), a
// causal softmax kernel turns them into probabilities, and GEMMs do P v and the backward. This
// costs O(s^2) memory per head ([batch, heads, seq, seq] f32 scores transiently, P kept in the
// layer dtype until I) and does the masked half of the work; a fused FlashAttention-style tiled
// kernel is the goal. kMaterialisesScores says which one is built, for `ppbench model` output.
#pragma once

#include <memory>

#include "workloads/cpu/attention.h"
#include "workloads/cuda/layer.h"
#include "workloads/cuda/linear.h"

namespace ppbench::cuda {

inline constexpr bool kMaterialisesScores = true;
inline constexpr const char* kAttentionNote =
    "CUDA attention materialises the s x s scores (batched cuBLASLt GEMMs + causal softmax "
    "kernel, O(s^2) memory per head); a fused FlashAttention-style kernel is not built yet";

using cpu::AttentionConfig;

class Attention final : public Layer {
 public:
  Attention(DeviceArena& params, const AttentionConfig& config, DType dtype, std::uint64_t seed);
  std::string name() const override { return "attention"; }

  // F keeps x (in the qkv projection), q and k after RoPE, v (head-major [batch, heads, seq,
  // head_dim]), the probabilities P [batch, heads, seq, seq] and o (in the output projection).
  // I frees q, k, v and P and keeps only the projections' (input, output gradient) pairs.
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override;

  const AttentionConfig& config() const { return cfg_; }
  Linear& qkv() { return *qkv_; }
  Linear& out() { return *out_; }

 private:
  AttentionConfig cfg_;
  DType dtype_;
  std::unique_ptr<Linear> qkv_;
  std::unique_ptr<Linear> out_;
};

}  // namespace ppbench::cuda
