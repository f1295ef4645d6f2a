// The FlashAttention-2 bf16 kernels for head_dim 64 and 128 (flash_fa2_forward.cu,
// flash_fa2_backward.cu): the fast path of the fused attention core's contract
// (attention_core.h), which flash_attention.cu dispatches to when fa2::forward_applies /
// fa2::backward_applies (flash_fa2_tiles.h) say so. Shapes and dtypes are checked by the caller.
#pragma once

#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

// o and lse as flash_attention_forward defines them; q [B, H, S, D], k and v [B, Hkv, S, D].
void fa2_forward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                 const DTensor& o, const DTensor& lse, float scale);

// dk, dv overwritten; dS K added into dq_acc (f32 [B, H, S, D], zeroed by the caller).
void fa2_backward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                  const DTensor& d_o, const DTensor& lse, const DTensor& delta,
                  const DTensor& dq_acc, const DTensor& dk, const DTensor& dv, float scale);

}  // namespace ppbench::cuda
