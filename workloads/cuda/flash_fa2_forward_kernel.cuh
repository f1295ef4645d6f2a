// FlashAttention-2 forward for bf16 at head_dim 64 and 128 (the contract: attention_core.h; the
// tiles: flash_fa2_tiles.h; the fragment maps: flash_fragments.h).
//
// A CTA of 4 warps owns 64 query rows of one head; a warp owns 16 of them. Q's fragments are
// loaded once (through shared memory, with ldmatrix) and stay in registers. K and V tiles of 64
// keys stream through two shared-memory stages by cp.async: the next tile is in flight while the
// current one is multiplied. Per tile, with mma.sync m16n8k16 (f32 accumulation):
//   S = Q K^T           accumulators of 8 n8 tiles per warp (16 rows x 64 keys)
//   online softmax      in registers, base 2: the 4 lanes that share a row (same groupID) reduce
//                       max and sum with two xor-shuffles; O is rescaled when the max grows
//   O += P V            P rounded to bf16 in registers: the accumulator layout of two n8 tiles is
//                       the A fragment of one k16 chunk, so P never touches shared memory
// Only the diagonal tile is masked (keys after the query); tiles after the CTA's last query are
// never loaded. At the end O / l is written in bf16 and lse = m + log(l) (natural log of the
// scaled scores' sum of exponentials, as the backward and the general kernels define it).
//
// The kernel only, in a header so that the host emulation (tests/simt/) compiles the same
// source; its launcher is flash_fa2_forward.cu.
#pragma once

#include <cmath>
#include <cstdint>

#include "workloads/cuda/flash_fa2_tile_ops.cuh"
#include "workloads/cuda/flash_fa2_tiles.h"
#include "workloads/cuda/flash_fragments.h"

namespace ppbench::cuda::fa2 {

template <int D>
__global__ void __launch_bounds__(ForwardTiles<D>::kThreads, ForwardTiles<D>::kMinBlocks)
    fa2_forward_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                       const bf16* __restrict__ v, bf16* __restrict__ o, float* __restrict__ lse,
                       Dims dims, float scale, float scale_log2) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using Tiles = ForwardTiles<D>;
  constexpr int kBr = Tiles::kQueryRows, kBc = Tiles::kKeyRows, kThreads = Tiles::kThreads;
  constexpr int kKc = D / 16;   // k16 chunks of head_dim
  constexpr int kSn = kBc / 8;  // n8 tiles of S per warp
  constexpr int kOn = D / 8;    // n8 tiles of O per warp
  extern __shared__ __align__(128) unsigned char smem[];
  auto stage_k = [&](int s) { return reinterpret_cast<bf16*>(smem + s * Tiles::kStageBytes); };
  auto stage_v = [&](int s) {
    return reinterpret_cast<bf16*>(smem + s * Tiles::kStageBytes + Tiles::kTileBytes);
  };
  bf16* q_staging = reinterpret_cast<bf16*>(smem + Tiles::kQStagingOffset);

  const int seq = dims.seq;
  const int batch_heads = dims.batch * dims.heads;
  const int q_tiles = (seq + kBr - 1) / kBr;
  // Heads vary fastest and the last query tiles (the most keys) come first: the long CTAs start
  // in the first wave and the short ones fill the tail.
  const int linear = static_cast<int>(blockIdx.x);
  const int bh = linear % batch_heads;
  const int q0 = (q_tiles - 1 - linear / batch_heads) * kBr;
  const int b = bh / dims.heads, h = bh % dims.heads;
  const int kvh = h / (dims.heads / dims.kv_heads);
  const bf16* qg = q + static_cast<std::int64_t>(bh) * seq * D;
  const bf16* kg = k + (static_cast<std::int64_t>(b) * dims.kv_heads + kvh) * seq * D;
  const bf16* vg = v + (static_cast<std::int64_t>(b) * dims.kv_heads + kvh) * seq * D;

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int row_base = q0 + 16 * warp;  // this warp's first query
  // Byte offsets of the rows this lane addresses in ldmatrix: A operands and V (.trans) take
  // the down-then-right placement, K (B stored [n][k]) the right-then-down one.
  const std::uint32_t a_lane = ldsm_lane(frag::ldsm_down_then_right(lane), D);
  const std::uint32_t b_lane = ldsm_lane(frag::ldsm_right_then_down(lane), D);

  const int kv_end = min(seq, q0 + kBr);  // keys after the tile's last query are all masked
  const int kv_tiles = (kv_end + kBc - 1) / kBc;

  load_tile_async<kBr, D, kThreads>(q_staging, qg, q0, seq);
  load_tile_async<kBc, D, kThreads>(stage_k(0), kg, 0, seq);
  load_tile_async<kBc, D, kThreads>(stage_v(0), vg, 0, seq);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  std::uint32_t qf[kKc][4];
#pragma unroll
  for (int kc = 0; kc < kKc; ++kc)
    ldsm_x4(qf[kc], ldsm_at(smem_u32(q_staging), a_lane, 16 * warp, 16 * kc, D));

  float oacc[kOn][4];
#pragma unroll
  for (int n = 0; n < kOn; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) oacc[n][e] = 0.0f;
  // Per thread, two rows: groupID (accumulator elements 0, 1) and groupID + 8 (elements 2, 3).
  // m is the running max of the raw scores; l is this thread's part of the row's sum of
  // exp2((s - m) scale log2(e)) (the 4 lanes of a row share m, so their partial sums are reduced
  // once, at the end).
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.0f, 0.0f};

  for (int t = 0; t < kv_tiles; ++t) {
    // Tile t has landed for this thread; the barrier makes it every thread's, and tells the
    // copies below that every warp is done with stage (t + 1) % 2 (tile t - 1, or Q's staging).
    cp_async_wait<0>();
    __syncthreads();
    if (t + 1 < kv_tiles) {
      load_tile_async<kBc, D, kThreads>(stage_k((t + 1) & 1), kg, (t + 1) * kBc, seq);
      load_tile_async<kBc, D, kThreads>(stage_v((t + 1) & 1), vg, (t + 1) * kBc, seq);
    }
    cp_async_commit();
    const std::uint32_t ks = smem_u32(stage_k(t & 1));
    const std::uint32_t vs = smem_u32(stage_v(t & 1));
    const int j0 = t * kBc;

    float s[kSn][4];
#pragma unroll
    for (int n = 0; n < kSn; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < kKc; ++kc) {
#pragma unroll
      for (int np = 0; np < kBc / 16; ++np) {
        std::uint32_t kb[4];  // B = K^T: K stored [key][d] is B stored [n][k]
        ldsm_x4(kb, ldsm_at(ks, b_lane, 16 * np, 16 * kc, D));
        mma_bf16_x2(s[2 * np], s[2 * np + 1], qf[kc], kb);
      }
    }

    // Mask keys after the query, which only the diagonal tile holds (keys past seq are there
    // too, and every row < seq is before them; rows >= seq are not written). The max is taken
    // over raw scores (scale > 0, see forward_applies), so the scale goes into one FFMA.
    if (j0 + kBc - 1 > row_base) {
#pragma unroll
      for (int n = 0; n < kSn; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const frag::Coord c = frag::mma_c(lane, e);
          if (j0 + 8 * n + c.col > row_base + c.row) s[n][e] = -INFINITY;
        }
      }
    }
    float m_new[2] = {m_run[0], m_run[1]};
#pragma unroll
    for (int n = 0; n < kSn; ++n) {
      m_new[0] = fmaxf(m_new[0], fmaxf(s[n][0], s[n][1]));
      m_new[1] = fmaxf(m_new[1], fmaxf(s[n][2], s[n][3]));
    }
    float alpha[2], m_scaled[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 1));
      m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 2));
      // A row that has seen only masked keys keeps m = -inf: subtract 0 instead, so that its
      // exponentials are exp2(-inf) = 0 and not exp2(-inf + inf) = NaN.
      m_scaled[r] = m_new[r] == -INFINITY ? 0.0f : m_new[r] * scale_log2;
      alpha[r] = exp2_ftz(fmaf(m_run[r], scale_log2, -m_scaled[r]));
      m_run[r] = m_new[r];
    }
#pragma unroll
    for (int n = 0; n < kSn; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = exp2_ftz(fmaf(s[n][e], scale_log2, -m_scaled[e >> 1]));
        sum[e >> 1] += s[n][e];
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + sum[r];
#pragma unroll
    for (int n = 0; n < kOn; ++n) {
      oacc[n][0] *= alpha[0];
      oacc[n][1] *= alpha[0];
      oacc[n][2] *= alpha[1];
      oacc[n][3] *= alpha[1];
    }

#pragma unroll
    for (int kc = 0; kc < kBc / 16; ++kc) {
      std::uint32_t pa[4];  // P's A fragment for keys 16 kc .. 16 kc + 15, from S's accumulators
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float* acc = s[2 * kc + frag::acc_tile_of_a(r)];
        pa[r] = pack_bf16(acc[frag::acc_elem_of_a(r)], acc[frag::acc_elem_of_a(r) + 1]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t vb[4];  // B = V stored [k][n]: transposed on load
        ldsm_x4_trans(vb, ldsm_at(vs, a_lane, 16 * kc, 16 * dp, D));
        mma_bf16_x2(oacc[2 * dp], oacc[2 * dp + 1], pa, vb);
      }
    }
  }

  bf16* og = o + static_cast<std::int64_t>(bh) * seq * D;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const frag::Coord c0 = frag::mma_c(lane, 2 * r);
    const int row = row_base + c0.row;
    if (row >= seq) continue;
    const float inv = 1.0f / l;  // key 0 is visible to every row: l >= exp2(0) = 1
#pragma unroll
    for (int n = 0; n < kOn; ++n) {
      *reinterpret_cast<std::uint32_t*>(og + static_cast<std::int64_t>(row) * D + 8 * n + c0.col) =
          pack_bf16(oacc[n][2 * r] * inv, oacc[n][2 * r + 1] * inv);
    }
    if ((lane & 3) == 0)
      lse[static_cast<std::int64_t>(bh) * seq + row] = m_run[r] * scale + logf(l);
  }
#else
  // A build without sm_80 code, run on an sm_80+ GPU from older PTX, would dispatch here (the
  // dispatch reads the device, not the build): fail the launch rather than leave outputs unset.
  __trap();
#endif
}

}  // namespace ppbench::cuda::fa2
