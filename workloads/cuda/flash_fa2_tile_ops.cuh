// What the FlashAttention-2 kernels build from the PTX instructions (flash_fa2_ptx.cuh): the async
// tile loader both kernels share, the addresses each lane gives to ldmatrix, and the pair of MMAs
// an ldmatrix .x4 B fragment feeds. Written only in terms of those instructions, so that the host
// emulation (tests/simt/) runs this code unchanged after defining PPBENCH_FA2_EMULATED and its own
// instructions.
#pragma once

#include <cstdint>

#ifndef PPBENCH_FA2_EMULATED
#include "workloads/cuda/flash_fa2_ptx.cuh"
#endif
#include "workloads/cuda/flash_fragments.h"

namespace ppbench::cuda::fa2 {

// Rows row0 .. row0 + kRows of a [seq, D] bf16 matrix into a swizzled [kRows, D] shared tile, by
// 16-byte chunks, rows at or past `seq` zero-filled. Consecutive threads take consecutive chunks
// of a row: coalesced reads, and conflict-free writes under the swizzle. A pass of the block
// covers a whole number of 8-row groups, so a thread's swizzle is the same in every pass.
template <int kRows, int D, int kThreads>
__device__ __forceinline__ void load_tile_async(bf16* tile, const bf16* __restrict__ src, int row0,
                                                int seq) {
  constexpr int kChunks = D / 8;
  constexpr int kRowsPerPass = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kRowsPerPass % 8 == 0 && kRows % kRowsPerPass == 0,
                "every thread copies the same chunks of every pass");
  const frag::Coord mine = frag::copy_chunk(static_cast<int>(threadIdx.x), D);
  const int r = mine.row, c = mine.col;
  const std::uint32_t dst = smem_u32(tile + frag::swizzle(r, c, D));
#pragma unroll
  for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
    const int row = row0 + pass * kRowsPerPass + r;
    const bool valid = row < seq;
    const bf16* from = valid ? src + static_cast<std::int64_t>(row) * D + c : src;
    cp_async_16(dst + pass * kRowsPerPass * D * 2, from, valid);
  }
}

// A lane's byte offset, within a swizzled tile `width` elements wide, of the row it gives to an
// ldmatrix .x4 with placement `where` (flash_fragments.h); ldsm_at adds the block (row0, col0).
__device__ __forceinline__ std::uint32_t ldsm_lane(frag::Coord where, int width) {
  return 2u * static_cast<std::uint32_t>(frag::swizzle(where.row, where.col, width));
}
// In bytes, ldsm_offset doubles term by term (2 (a ^ b) = 2a ^ 2b).
__device__ __forceinline__ std::uint32_t ldsm_at(std::uint32_t tile, std::uint32_t lane_offset,
                                                 int row0, int col0, int width) {
  return tile + ((lane_offset ^ (2u * col0)) + 2u * row0 * width);
}

// A 16 x 16 A fragment times the 16 x 16 B fragment one ldmatrix .x4 gave, as the two n = 8
// halves the MMA takes: d0 += A B[:, 0:8], d1 += A B[:, 8:16].
__device__ __forceinline__ void mma_bf16_x2(float (&d0)[4], float (&d1)[4],
                                            const std::uint32_t (&a)[4],
                                            const std::uint32_t (&b)[4]) {
  mma_bf16(d0, a, b[0], b[1]);
  mma_bf16(d1, a, b[2], b[3]);
}

}  // namespace ppbench::cuda::fa2
