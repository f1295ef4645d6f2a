// FlashAttention-2 backward for bf16 at head_dim 64 and 128 (the contract: attention_core.h; the
// tiles: flash_fa2_tiles.h; the fragment maps: flash_fragments.h).
//
// A CTA of 8 warps owns 128 keys of one kv head; a warp owns 16 of them and keeps their dK and dV
// rows in f32 registers. K and V stay in shared memory. The CTA walks the 64-query tiles at or
// after its first key, for each query head of the GQA group (the group's sum for dK and dV stays
// in registers), with Q, dO, lse and delta of the next tile in flight (cp.async, two stages).
// Per tile a warp computes, transposed so that its keys are the rows (the m16 dimension):
//   S^T  = K_w Q^T                      P^T = exp2(S^T scale log2(e) - lse log2(e)), masked
//   dP^T = V_w dO^T                     dS^T = P^T (dP^T - delta) scale
//   dV  += P^T dO,  dK += dS^T Q        P^T and dS^T reused from the accumulators as A operands
// dQ = dS K sums over all the CTA's keys, so dS^T goes to shared memory (bf16) once; after a
// barrier each warp computes a 16-query x D/2 part of dQ and adds it into the f32 dQ buffer with
// float2 atomics. Atomics rather than a separate dQ pass: that pass would recompute S and dP
// (2 more of the 5 products, +40 % tensor work) to save 64 x D atomic adds per (key block, query
// tile) pair, which the L2 absorbs while the tensor cores work (FlashAttention-2 does the same).
//
// The kernel only, in a header so that the host emulation (tests/simt/) compiles the same
// source; its launcher is flash_fa2_backward.cu.
#pragma once

#include <cmath>
#include <cstdint>

#include "workloads/cuda/flash_fa2_tile_ops.cuh"
#include "workloads/cuda/flash_fa2_tiles.h"
#include "workloads/cuda/flash_fragments.h"

namespace ppbench::cuda::fa2 {

__device__ __forceinline__ void atomic_add_f32x2(float* p, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(p), make_float2(x, y));  // one vector reduction in L2
#else
  atomicAdd(p, x);
  atomicAdd(p + 1, y);
#endif
}

template <int D>
__global__ void __launch_bounds__(BackwardTiles<D>::kThreads, 1)
    fa2_backward_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                        const bf16* __restrict__ v, const bf16* __restrict__ dout,
                        const float* __restrict__ lse, const float* __restrict__ delta,
                        float* __restrict__ dq, bf16* __restrict__ dk, bf16* __restrict__ dv,
                        Dims dims, float scale, float scale_log2) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using Tiles = BackwardTiles<D>;
  constexpr int kBr = Tiles::kQueryRows, kBc = Tiles::kKeyRows, kThreads = Tiles::kThreads;
  constexpr int kKc = D / 16;              // k16 chunks of head_dim
  constexpr int kSn = kBr / 8;             // n8 tiles (queries) of S^T, dP^T per warp
  constexpr int kDn = D / 8;               // n8 tiles of dK, dV per warp
  constexpr int kQn = Tiles::kDqCols / 8;  // n8 tiles of a warp's part of dQ
  static_assert(2 * kBr <= kThreads, "one thread per lse and delta element");
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* ks = reinterpret_cast<bf16*>(smem + Tiles::kK);
  bf16* vs = reinterpret_cast<bf16*>(smem + Tiles::kV);
  bf16* ds_t = reinterpret_cast<bf16*>(smem + Tiles::kDsT);  // dS^T [key][query], swizzled
  auto stage = [&](int s) { return smem + Tiles::kStage0 + s * Tiles::kStageBytes; };

  const int seq = dims.seq;
  const int batch_kv = dims.batch * dims.kv_heads;
  const int group = dims.heads / dims.kv_heads;
  // kv heads vary fastest and key block 0 (which meets every query) comes first: the long CTAs
  // start in the first wave and the short ones fill the tail.
  const int linear = static_cast<int>(blockIdx.x);
  const int bkv = linear % batch_kv;
  const int j0 = linear / batch_kv * kBc;
  const int b = bkv / dims.kv_heads, kvh = bkv % dims.kv_heads;
  const std::int64_t kv_off = static_cast<std::int64_t>(bkv) * seq * D;
  // Queries before j0 see none of these keys; kBc is a multiple of kBr, so j0 starts a tile.
  const int first_tile = j0 / kBr;
  const int per_head = (seq + kBr - 1) / kBr - first_tile;
  const int iters = group * per_head;
  auto head_of = [&](int it) { return b * dims.heads + kvh * group + it / per_head; };
  auto first_query = [&](int it) { return (first_tile + it % per_head) * kBr; };

  // Q, dO, lse and delta of iteration `it` into stage s (rows past seq zero-filled).
  auto issue = [&](int it, int s) {
    const int bh = head_of(it), i0 = first_query(it);
    const std::int64_t off = static_cast<std::int64_t>(bh) * seq * D;
    unsigned char* st = stage(s);
    load_tile_async<kBr, D, kThreads>(reinterpret_cast<bf16*>(st + Tiles::kStageQ), q + off, i0,
                                      seq);
    load_tile_async<kBr, D, kThreads>(reinterpret_cast<bf16*>(st + Tiles::kStageDo), dout + off, i0,
                                      seq);
    const int tid = static_cast<int>(threadIdx.x);
    if (tid < 2 * kBr) {
      const bool is_delta = tid >= kBr;
      const int r = tid % kBr, i = i0 + r;
      const float* src = (is_delta ? delta : lse) + static_cast<std::int64_t>(bh) * seq;
      cp_async_4(smem_u32(st + (is_delta ? Tiles::kStageDelta : Tiles::kStageLse) + r * 4),
                 i < seq ? src + i : src, i < seq);
    }
  };

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  // Byte offsets of the rows this lane addresses in ldmatrix (placements: flash_fragments.h).
  const std::uint32_t a_lane = ldsm_lane(frag::ldsm_down_then_right(lane), D);
  const std::uint32_t b_lane = ldsm_lane(frag::ldsm_right_then_down(lane), D);
  const std::uint32_t b_lane_ds = ldsm_lane(frag::ldsm_right_then_down(lane), kBr);
  const std::uint32_t ks_u = smem_u32(ks), vs_u = smem_u32(vs);
  const std::uint32_t ds_u = smem_u32(ds_t);
  const int key_base = j0 + 16 * warp;        // this warp's first key
  const int col0 = frag::mma_c(lane, 0).col;  // the query column of accumulator elements 0, 2
  const int dq_rows = warp % Tiles::kDqRowBlocks * 16;
  const int dq_cols = warp / Tiles::kDqRowBlocks * Tiles::kDqCols;

  load_tile_async<kBc, D, kThreads>(ks, k + kv_off, j0, seq);
  load_tile_async<kBc, D, kThreads>(vs, v + kv_off, j0, seq);
  issue(0, 0);
  cp_async_commit();

  float dk_acc[kDn][4], dv_acc[kDn][4];
#pragma unroll
  for (int n = 0; n < kDn; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[n][e] = dv_acc[n][e] = 0.0f;

  for (int it = 0; it < iters; ++it) {
    // This iteration's tiles (and at it = 0, K and V) have landed for every thread, and every
    // warp is done with the other stage (read by the previous iteration before its dS barrier).
    cp_async_wait<0>();
    __syncthreads();
    if (it + 1 < iters) issue(it + 1, (it + 1) & 1);
    cp_async_commit();
    const int bh = head_of(it), i0 = first_query(it);
    const unsigned char* st = stage(it & 1);
    const std::uint32_t qs = smem_u32(st + Tiles::kStageQ);
    const std::uint32_t dos = smem_u32(st + Tiles::kStageDo);
    const float* lse_s = reinterpret_cast<const float*>(st + Tiles::kStageLse);
    const float* delta_s = reinterpret_cast<const float*>(st + Tiles::kStageDelta);

    // S^T = K_w Q^T and dP^T = V_w dO^T: A = the warp's K (V) rows, B = Q (dO) stored [n][k].
    float sacc[kSn][4], dpacc[kSn][4];
#pragma unroll
    for (int n = 0; n < kSn; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sacc[n][e] = dpacc[n][e] = 0.0f;
        // Not unrolled: nothing here is indexed by kc, and unrolled, ptxas hoists the loads of
        // later chunks into registers that the accumulators need.
#pragma unroll 1
    for (int kc = 0; kc < kKc; ++kc) {
      std::uint32_t ka[4], va[4];
      ldsm_x4(ka, ldsm_at(ks_u, a_lane, 16 * warp, 16 * kc, D));
      ldsm_x4(va, ldsm_at(vs_u, a_lane, 16 * warp, 16 * kc, D));
#pragma unroll
      for (int np = 0; np < kBr / 16; ++np) {
        std::uint32_t qb[4], ob[4];
        ldsm_x4(qb, ldsm_at(qs, b_lane, 16 * np, 16 * kc, D));
        ldsm_x4(ob, ldsm_at(dos, b_lane, 16 * np, 16 * kc, D));
        mma_bf16_x2(sacc[2 * np], sacc[2 * np + 1], ka, qb);
        mma_bf16_x2(dpacc[2 * np], dpacc[2 * np + 1], va, ob);
      }
    }

    // P^T from the saved lse; then dS^T. Masks only where a key may follow a query (the
    // diagonal) or queries run past seq (their zero-filled lse would give P = 1). Keys past seq
    // follow every query < seq, so the causal test covers them.
    const bool edge = key_base + 15 > i0 || i0 + kBr > seq;
#pragma unroll
    for (int n = 0; n < kSn; ++n) {
      const float2 l2 = *reinterpret_cast<const float2*>(lse_s + 8 * n + col0);
      const float2 d2 = *reinterpret_cast<const float2*>(delta_s + 8 * n + col0);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float row_lse = (e & 1) ? l2.y : l2.x;
        const float row_delta = (e & 1) ? d2.y : d2.x;
        float p = exp2_ftz(fmaf(sacc[n][e], scale_log2, -row_lse * kLog2e));
        if (edge) {
          const frag::Coord c = frag::mma_c(lane, e);
          const int key = key_base + c.row, query = i0 + 8 * n + c.col;
          if (key > query || query >= seq) p = 0.0f;
        }
        sacc[n][e] = p;
        dpacc[n][e] = p * (dpacc[n][e] - row_delta) * scale;
      }
    }

    // dV += P^T dO and dK += dS^T Q: B = dO (Q) stored [k = query][n = d], transposed on load.
    // dS^T also goes to shared memory for dQ, from the very registers the MMA uses.
#pragma unroll
    for (int kc = 0; kc < kBr / 16; ++kc) {
      std::uint32_t pa[4], da[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int tile = 2 * kc + frag::acc_tile_of_a(r), e = frag::acc_elem_of_a(r);
        pa[r] = pack_bf16(sacc[tile][e], sacc[tile][e + 1]);
        da[r] = pack_bf16(dpacc[tile][e], dpacc[tile][e + 1]);
        const frag::Coord c = frag::mma_c(lane, e);
        *reinterpret_cast<std::uint32_t*>(
            ds_t + frag::swizzle(16 * warp + c.row, 8 * tile + c.col, kBr)) = da[r];
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t ob[4], qb[4];
        ldsm_x4_trans(ob, ldsm_at(dos, a_lane, 16 * kc, 16 * dp, D));
        ldsm_x4_trans(qb, ldsm_at(qs, a_lane, 16 * kc, 16 * dp, D));
        mma_bf16_x2(dv_acc[2 * dp], dv_acc[2 * dp + 1], pa, ob);
        mma_bf16_x2(dk_acc[2 * dp], dk_acc[2 * dp + 1], da, qb);
      }
    }
    __syncthreads();  // dS^T complete

    // dQ part = dS K: A = dS stored transposed ([key][query]), B = K stored [k = key][n = d].
    float qacc[kQn][4];
#pragma unroll
    for (int n = 0; n < kQn; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) qacc[n][e] = 0.0f;
#pragma unroll 1
    for (int kc = 0; kc < kBc / 16; ++kc) {
      std::uint32_t sa[4];
      ldsm_x4_trans(sa, ldsm_at(ds_u, b_lane_ds, 16 * kc, dq_rows, kBr));
#pragma unroll
      for (int dp = 0; dp < Tiles::kDqCols / 16; ++dp) {
        std::uint32_t kb[4];
        ldsm_x4_trans(kb, ldsm_at(ks_u, a_lane, 16 * kc, dq_cols + 16 * dp, D));
        mma_bf16_x2(qacc[2 * dp], qacc[2 * dp + 1], sa, kb);
      }
    }
    float* dqg = dq + static_cast<std::int64_t>(bh) * seq * D;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const frag::Coord c = frag::mma_c(lane, 2 * h);
      const int query = i0 + dq_rows + c.row;
      if (query >= seq) continue;
#pragma unroll
      for (int n = 0; n < kQn; ++n)
        atomic_add_f32x2(dqg + static_cast<std::int64_t>(query) * D + dq_cols + 8 * n + c.col,
                         qacc[n][2 * h], qacc[n][2 * h + 1]);
    }
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const frag::Coord c = frag::mma_c(lane, 2 * h);
    const int key = key_base + c.row;
    if (key >= seq) continue;
    const std::int64_t at = kv_off + static_cast<std::int64_t>(key) * D + c.col;
#pragma unroll
    for (int n = 0; n < kDn; ++n) {
      *reinterpret_cast<std::uint32_t*>(dk + at + 8 * n) =
          pack_bf16(dk_acc[n][2 * h], dk_acc[n][2 * h + 1]);
      *reinterpret_cast<std::uint32_t*>(dv + at + 8 * n) =
          pack_bf16(dv_acc[n][2 * h], dv_acc[n][2 * h + 1]);
    }
  }
#else
  // A build without sm_80 code, run on an sm_80+ GPU from older PTX, would dispatch here (the
  // dispatch reads the device, not the build): fail the launch rather than leave outputs unset.
  __trap();
#endif
}

}  // namespace ppbench::cuda::fa2
