// Causal grouped-query self-attention on [batch, seq, hidden], as cpu::Attention (same config,
// same fused q | k | v projection, rotate-half RoPE, W stored [out, in]).
//
// The projections are cuBLASLt GEMMs (Linear); q, k and v move to the head-major layout
// [batch, heads, seq, head_dim] (RoPE applied on the way), and the s x s part runs in one of the
// two cores of attention_core.h: the fused FlashAttention-style kernels (the default: O(s)
// memory, masked tiles skipped) or the materialised scores (O(s^2) memory, a second opinion).
#pragma once

#include <memory>

#include "workloads/cuda/attention_note.h"
#include "workloads/cuda/layer.h"
#include "workloads/cuda/linear.h"
#include "workloads/layer_configs.h"

namespace ppbench::cuda {

enum class AttentionKernel { kFused, kMaterialised };

const char* attention_kernel_name(AttentionKernel k);

class Attention final : public Layer {
 public:
  Attention(DeviceArena& params, const AttentionConfig& config, DType dtype, std::uint64_t seed,
            AttentionKernel kernel = AttentionKernel::kFused);
  std::string name() const override { return "attention"; }

  // F keeps x (in the qkv projection), q and k after RoPE, v (head-major), o (in the output
  // projection) and, fused, the log-sum-exp [batch, heads, seq] f32 per query (materialised:
  // the probabilities [batch, heads, seq, seq] instead). I frees all but the projections'
  // (input, output gradient) pairs.
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override;

  const AttentionConfig& config() const { return cfg_; }
  AttentionKernel kernel() const { return kernel_; }
  Linear& qkv() { return *qkv_; }
  Linear& out() { return *out_; }

 private:
  AttentionConfig cfg_;
  DType dtype_;
  AttentionKernel kernel_;
  std::unique_ptr<Linear> qkv_;
  std::unique_ptr<Linear> out_;
};

}  // namespace ppbench::cuda
