// Lane -> element maps of the warp-level tensor-core instructions that the FlashAttention-2 bf16
// kernels (flash_fa2_forward.cu, flash_fa2_backward.cu) rely on, and the shared-memory swizzle
// they load through. Plain constexpr functions with no CUDA include, callable on the host, so that
// tests/cuda/test_flash_fragments.cpp simulates a warp on the CPU and checks every map (and the
// way the kernels compose them) against a plain matrix product without a GPU.
//
// Sources, PTX ISA 9.0 (NVIDIA, "Parallel Thread Execution ISA"):
//   9.7.14.5.8  "Matrix Fragments for mma.m16n8k16 with floating point type": the A, B and C/D
//               formulas for .bf16 / .f32, with groupID = lane >> 2, threadID_in_group = lane % 4.
//   9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix": for .x4, threads 8m .. 8m+7 give
//               the addresses of rows 0..7 of matrix m, and matrix m lands in destination register
//               m; Figure 104: lane l receives row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of
//               an 8x8 b16 matrix; .trans loads the matrix column-major, so lane l receives column
//               l / 4, rows 2 (l % 4) and 2 (l % 4) + 1 of the matrix as stored.
// A .b32 register holding two 16-bit elements keeps the lower-numbered one in its low half.
#pragma once

#if defined(__CUDACC__)
#define PPBENCH_HD __host__ __device__
#else
#define PPBENCH_HD
#endif

namespace ppbench::cuda::frag {

struct Coord {
  int row;
  int col;
};
PPBENCH_HD constexpr bool operator==(Coord a, Coord b) { return a.row == b.row && a.col == b.col; }

// mma.m16n8k16 A (16 x 16, .row): element i = 0..7 of `lane`; register i / 2 holds i, i + 1.
// Rows: groupID for a0, a1, a4, a5, groupID + 8 otherwise; columns: 2 threadID_in_group +
// (i & 1), plus 8 for a4..a7.
PPBENCH_HD constexpr Coord mma_a(int lane, int i) {
  return {(lane >> 2) + ((i >> 1) & 1) * 8, (lane & 3) * 2 + (i & 1) + (i >> 2) * 8};
}

// mma.m16n8k16 B (16 x 8, .col): element i = 0..3; `row` is k, `col` is n. Rows: 2
// threadID_in_group + (i & 1), plus 8 for b2, b3; column: groupID.
PPBENCH_HD constexpr Coord mma_b(int lane, int i) {
  return {(lane & 3) * 2 + (i & 1) + (i >> 1) * 8, lane >> 2};
}

// mma.m16n8k16 C and D (16 x 8, f32): element i = 0..3. Rows: groupID for c0, c1, groupID + 8
// for c2, c3; columns: 2 threadID_in_group + (i & 1).
PPBENCH_HD constexpr Coord mma_c(int lane, int i) {
  return {(lane >> 2) + (i >> 1) * 8, (lane & 3) * 2 + (i & 1)};
}

// ldmatrix .m8n8 .b16: the element of the 8x8 matrix (row, col as stored) that lands in half h
// (0 low, 1 high) of `lane`'s register for that matrix.
PPBENCH_HD constexpr Coord ldsm_received(int lane, int h, bool trans) {
  return trans ? Coord{(lane & 3) * 2 + h, lane >> 2} : Coord{lane >> 2, (lane & 3) * 2 + h};
}

// Which row a lane addresses in ldmatrix .x4 over a 16 x 16 block, as (row, first column) offsets
// within the block: lane l gives row l & 7 of matrix l >> 3. Two placements of the 4 matrices:
//
//   down_then_right   matrix 0 top-left, 1 bottom-left, 2 top-right, 3 bottom-right. Used for
//                     an A operand stored [m][k] (no .trans: registers are a0a1, a2a3, a4a5,
//                     a6a7) and for a B operand stored [k][n] (.trans: registers are b0b1 and b2b3
//                     of the left n8 tile, then b0b1 and b2b3 of the right one).
//   right_then_down   matrix 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right. Used for a
//                     B operand stored [n][k] (no .trans: b0b1, b2b3 of the upper n8 tile, then
//                     of the lower) and for an A operand stored [k][m] (.trans: a0a1, a2a3, a4a5,
//                     a6a7).
PPBENCH_HD constexpr Coord ldsm_down_then_right(int lane) {
  return {(lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8};
}
PPBENCH_HD constexpr Coord ldsm_right_then_down(int lane) {
  return {(lane & 7) + (lane >> 4) * 8, ((lane >> 3) & 1) * 8};
}

// The accumulators of two adjacent n8 tiles (2 kc, 2 kc + 1) of an m16 row block hold, in the
// same lanes, exactly the 16 x 16 A operand of k-chunk kc (rows g and g + 8, columns 2t, 2t + 1
// and 8 more): A register r (elements 2r, 2r + 1) is accumulator tile 2 kc + acc_tile_of_a(r),
// elements acc_elem_of_a(r) and acc_elem_of_a(r) + 1. So S = Q K^T becomes P's A fragments of
// O += P V (and P^T, dS^T become the A fragments of dV, dK) without leaving registers.
PPBENCH_HD constexpr int acc_tile_of_a(int r) { return r >> 1; }
PPBENCH_HD constexpr int acc_elem_of_a(int r) { return (r & 1) * 2; }

// Element offset of (row, col) in a shared tile of bf16 rows `width` elements long (a multiple
// of 64, so a row is a whole number of 8-chunk groups). The 16-byte chunk index is XORed with
// row % 8: the 8 rows one ldmatrix phase reads at the same logical chunk, and the 8 consecutive
// chunks of a row that 8 threads write with cp.async, fall in 8 distinct 4-bank groups, where
// unswizzled rows of 128 or 256 bytes would all hit the same banks.
PPBENCH_HD constexpr int swizzle(int row, int col, int width) {
  return row * width + (((col >> 3) ^ (row & 7)) << 3) + (col & 7);
}

// The same offsets, split so that a kernel's unrolled loops cost one XOR per 16-column block:
// a lane's ldmatrix row in the 16 x 16 block at (row0, col0) (row0 a multiple of 8, col0 of 16)
// is at swizzle(row0 + where.row, col0 + where.col, width) = ldsm_offset(swizzle(where.row,
// where.col, width), row0, col0, width). Why: row0 leaves row % 8 alone and adds whole rows; and
// col0 / 8 is even while where.col / 8 is 0 or 1, so the chunk (col0 + where.col) / 8 ^ row % 8
// is where's chunk XOR col0 / 8, which only touches the bits below one row.
PPBENCH_HD constexpr int ldsm_offset(int lane_offset, int row0, int col0, int width) {
  return (lane_offset ^ col0) + row0 * width;
}

// The 16-byte chunk thread `tid` copies in each pass of a cp.async tile load, as (row, first
// column) in a block of rows `width` elements wide: consecutive threads take consecutive chunks
// of a row, so a warp reads whole rows of global memory and, under the swizzle, each 8 threads
// (one 128-byte shared-memory wavefront) write 8 distinct bank groups.
PPBENCH_HD constexpr Coord copy_chunk(int tid, int width) {
  return {tid / (width / 8), tid % (width / 8) * 8};
}

}  // namespace ppbench::cuda::frag
