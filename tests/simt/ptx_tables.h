// The lane -> element tables of the PTX ISA 9.0 for mma.m16n8k16 (.bf16 A and B, f32 C/D) and
// ldmatrix .m8n8.x4 (.trans), transcribed as the ISA writes them (9.7.14.5.8, 9.7.14.5.15,
// Figure 104) and independently of workloads/cuda/flash_fragments.h, whose bit arithmetic the
// host tests hold to them. Used by the simulated warp of test_flash_fragments.cpp and by the
// emulated instructions that run the kernels themselves (fa2_instructions.h).
#pragma once

#include "workloads/cuda/flash_fragments.h"

namespace ppbench::cuda::frag {

// groupID = %laneid >> 2, threadID_in_group = %laneid % 4 (all three tables).
inline int group_id(int lane) { return lane >> 2; }
inline int thread_in_group(int lane) { return lane % 4; }

// A, .bf16: row = groupID for ai where 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise;
// col = threadID_in_group * 2 + (i & 0x1) for i < 4, + 8 for i >= 4.
inline Coord ptx_a(int lane, int i) {
  const int row = ((0 <= i && i < 2) || (4 <= i && i < 6)) ? group_id(lane) : group_id(lane) + 8;
  const int col =
      i < 4 ? thread_in_group(lane) * 2 + (i & 0x1) : thread_in_group(lane) * 2 + (i & 0x1) + 8;
  return {row, col};
}
// B, .bf16: row = threadID_in_group * 2 + (i & 0x1) for bi where i < 2, + 8 for i >= 2;
// col = groupID.
inline Coord ptx_b(int lane, int i) {
  const int row =
      i < 2 ? thread_in_group(lane) * 2 + (i & 0x1) : thread_in_group(lane) * 2 + (i & 0x1) + 8;
  return {row, group_id(lane)};
}
// C/D: row = groupID for ci where i < 2, groupID + 8 for i >= 2; col = threadID_in_group * 2 +
// (i & 0x1).
inline Coord ptx_c(int lane, int i) {
  return {i < 2 ? group_id(lane) : group_id(lane) + 8, thread_in_group(lane) * 2 + (i & 0x1)};
}
// ldmatrix, Figure 104: a group of four consecutive threads loads a row; lane l holds row l / 4,
// columns 2 (l % 4) and 2 (l % 4) + 1. .trans: the matrix is loaded column-major, so the roles of
// stored rows and columns swap.
inline Coord ptx_ldsm(int lane, int h, bool trans) {
  const Coord loaded{lane / 4, 2 * (lane % 4) + h};
  return trans ? Coord{loaded.col, loaded.row} : loaded;
}

}  // namespace ppbench::cuda::frag
