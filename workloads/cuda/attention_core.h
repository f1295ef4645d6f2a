// The s x s part of causal grouped-query attention, on head-major tensors: q [B, H, S, D],
// k and v [B, Hkv, S, D] (Hkv divides H; query head h reads kv head h / (H / Hkv)), the output
// and its gradient [B, H, S, D], all in the layer dtype. Two implementations of one contract:
//
//   fused        FlashAttention-style tiled kernels (flash_attention.cu, and for bf16 at head_dim
//                64 / 128 the register-resident FlashAttention-2 kernels of flash_fa2_*.cu, which
//                flash_attention.cu dispatches to): a block owns a tile of
//                queries, streams the causal tiles of keys through shared memory with an online
//                softmax, and keeps only O and the per-row log-sum-exp; the backward recomputes
//                P tile by tile from that log-sum-exp. O(S) memory per head, masked tiles skipped.
//   materialised scores and probabilities as [B, H, S, S] tensors through batched cuBLASLt GEMMs
//                and a causal softmax kernel (attention_materialised.cu). O(S^2) memory per
//                head; kept as a second opinion for the tests and the benchmark.
//
// `scale` multiplies the scores before the softmax (1/sqrt(D) in the layer).
#pragma once

#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

// Which fused kernels run. kAuto: the FlashAttention-2 kernels (flash_fa2_*.cu) where they
// apply, bf16 at head_dim 64 or 128 on compute capability 8.0 and up, else the general tiled
// kernels (flash_attention.cu); kGeneral: the general kernels always, as a second opinion on the
// first (tests/cuda/test_flash_paths.cpp). The environment variable PPBENCH_FLASH=general turns
// kAuto into kGeneral for a whole run (unset or "auto": kAuto).
enum class FlashPath { kAuto, kGeneral };

// PPBENCH_FLASH read once: kGeneral for "general", kAuto when unset, empty or "auto"; any other
// value is a UsageError naming it.
FlashPath flash_path_from_environment();

// Fused forward: writes o and lse ([B, H, S] f32: max + log(sum exp) of each row's scaled scores).
void flash_attention_forward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                             const DTensor& o, const DTensor& lse, float scale,
                             FlashPath path = FlashPath::kAuto);

// delta[b, h, i] = sum_c dO * O over head h's columns of token (b, i), with O and dO in the token
// layout [B, S, H * D] (the output projection's input and input gradient): the rowsum(P * dP)
// term of the softmax backward, computed without P.
void attention_row_dot(Context& ctx, const DTensor& o_tokens, const DTensor& do_tokens,
                       const DTensor& delta, std::int64_t heads, std::int64_t head_dim);

// Fused backward: dq, dk, dv (overwritten) from q, k, v, dO (head-major), lse and delta.
void flash_attention_backward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                              const DTensor& d_o, const DTensor& lse, const DTensor& delta,
                              const DTensor& dq, const DTensor& dk, const DTensor& dv, float scale,
                              FlashPath path = FlashPath::kAuto);

// What the fused passes check before any launch, since their kernels index every tensor by q's
// and k's sizes and trust it: q [B, H, S, D], k and v [B, Hkv, S, D] (Hkv divides H, B x H at
// most 65535), one dtype; o, dO and dq as q; dk and dv as k; lse and delta [B, H, S] f32.
// Throws std::invalid_argument naming the first tensor that differs. Host code: no GPU needed.
void check_flash_forward(const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& o,
                         const DTensor& lse);
void check_flash_backward(const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& d_o,
                          const DTensor& lse, const DTensor& delta, const DTensor& dq,
                          const DTensor& dk, const DTensor& dv);

// Materialised forward: writes o and returns the probabilities P [B, H, S, S] (layer dtype).
DTensor materialised_attention_forward(Context& ctx, const DTensor& q, const DTensor& k,
                                       const DTensor& v, const DTensor& o, float scale);

// Materialised backward from the kept probabilities.
void materialised_attention_backward(Context& ctx, const DTensor& q, const DTensor& k,
                                     const DTensor& v, const DTensor& probs, const DTensor& d_o,
                                     const DTensor& dq, const DTensor& dk, const DTensor& dv,
                                     float scale);

// Shared memory the fused kernels need per block for head_dim d and an element of `elem` bytes,
// with the tile sizes they would choose under a `limit` of bytes per block (0 if none fits):
// exposed so that host tests can check the choice without a GPU.
struct FlashTiles {
  int query_rows = 0;  // queries per tile
  int key_rows = 0;    // keys per tile
  std::size_t shared_bytes = 0;
};
FlashTiles flash_forward_tiles(int head_dim, int elem_bytes, std::size_t limit);
FlashTiles flash_backward_tiles(int head_dim, int elem_bytes, std::size_t limit);

}  // namespace ppbench::cuda
