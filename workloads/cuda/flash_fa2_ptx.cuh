// The PTX the FlashAttention-2 bf16 kernels use (mma.sync m16n8k16, ldmatrix, cp.async) as inline
// functions, and the async tile loader both kernels share. Included by flash_fa2_*.cu only. The
// lane -> element maps these instructions imply live in flash_fragments.h, where they are tested.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "workloads/cuda/flash_fragments.h"

namespace ppbench::cuda::fa2 {

using bf16 = __nv_bfloat16;

// log2(e) and ln(2): the kernels run the softmax in base 2 (exp2 is one MUFU instruction) and
// convert the log-sum-exp back to natural log, which is what the saved lse means.
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// D += A B, A 16 x 16 bf16 (4 registers), B 16 x 8 bf16 (2 registers), D 16 x 8 f32.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// volatile: ordered against the barriers and the plain shared-memory stores around them.
__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 16 bytes global -> shared without staging in registers; src_size 0 zero-fills the destination
// (rows past the sequence end), and `src` must still be a valid address then.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_4(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits for all but the newest `kPending` groups of this thread; a __syncthreads must follow
// before other threads' copies may be read.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// 2^x in one MUFU.EX2 (relative error about 2^-22), results below 2^-126 flushed to 0: exp2f's
// denormal handling costs three more instructions per element of S, and a probability that small
// is 0 in bf16 P and negligible in the f32 row sum.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two f32 as the bf16x2 register of an mma operand: `lo` (the lower column) in the low half.
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

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

struct Dims {
  int batch;
  int heads;
  int kv_heads;
  int seq;
};

}  // namespace ppbench::cuda::fa2
