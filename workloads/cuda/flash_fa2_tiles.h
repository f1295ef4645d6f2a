// Tile shapes, shared-memory layouts and the dispatch rule of the FlashAttention-2 bf16 kernels
// (flash_fa2_forward.cu, flash_fa2_backward.cu). Plain C++ with no CUDA include: the kernels take
// their constants from here and tests/cuda/test_flash_fragments.cpp checks the arithmetic on the
// host.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

namespace ppbench::cuda::fa2 {

inline constexpr std::size_t kBf16 = 2;

// log2(e): the kernels run the softmax in base 2 (exp2 is one MUFU instruction) and
// convert the log-sum-exp back to natural log, which is what the saved lse means.
inline constexpr float kLog2e = 1.4426950408889634f;

// The attention problem a kernel launch covers: q [batch, heads, seq, D], k and v
// [batch, kv_heads, seq, D].
struct Dims {
  int batch;
  int heads;
  int kv_heads;
  int seq;
};

// Forward: a CTA of 4 warps owns 64 query rows of one head, a warp 16 of them (one m16 block)
// with Q's fragments in registers for the whole key loop, so K and V are the only shared tiles:
// 64 keys each, double-buffered. Q is staged once through the second buffer (before its first
// use), so it needs no shared memory of its own. 4 warps (not 8) because a thread holds Q (D/4
// registers), O (D/2) and S (32): about 170 registers at D = 128, so 3 CTAs (12 warps) per SM.
template <int D>
struct ForwardTiles {
  static_assert(D % 64 == 0, "the swizzle needs rows of whole 8-chunk groups");
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kQueryRows = 16 * kWarps;
  static constexpr int kKeyRows = 64;
  static constexpr int kStages = 2;
  // CTAs per SM the registers are capped for (65536 / (kThreads * kMinBlocks) per thread): ptxas
  // would otherwise spend up to 255 on hoisting loads, and halve the resident warps.
  static constexpr int kMinBlocks = D >= 128 ? 3 : 4;
  static constexpr std::size_t kTileBytes = std::size_t{kKeyRows} * D * kBf16;  // one K or V tile
  static constexpr std::size_t kStageBytes = 2 * kTileBytes;                    // K then V
  static constexpr std::size_t kQStagingOffset = kStageBytes;                   // stage 1
  static constexpr std::size_t kSharedBytes = kStages * kStageBytes;
  static_assert(std::size_t{kQueryRows} * D * kBf16 <= kStageBytes, "Q must fit in one stage");
};

// Backward: a CTA of 8 warps owns 128 keys of one kv head, a warp 16 of them with their dK and dV
// rows in registers (f32, D/2 registers each). It walks the 64-query tiles at or after its first
// key, for every query head of the GQA group, so dK and dV need no atomics. K and V stay in
// shared memory; Q, dO, lse and delta are double-buffered; dS^T goes through shared memory once
// per tile for dQ = dS K, which spans all warps' keys. 128 keys per CTA (not 64) halves both the
// dQ atomics and the Q / dO reloads, which are per (key block, query tile) pair.
template <int D>
struct BackwardTiles {
  static_assert(D % 64 == 0, "the swizzle needs rows of whole 8-chunk groups");
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeyRows = 16 * kWarps;
  static constexpr int kQueryRows = 64;
  static constexpr int kStages = 2;
  // dQ of a tile (kQueryRows x D) split over the warps: 16-row blocks x column groups.
  static constexpr int kDqRowBlocks = kQueryRows / 16;
  static constexpr int kDqColGroups = kWarps / kDqRowBlocks;
  static constexpr int kDqCols = D / kDqColGroups;
  static_assert(kDqRowBlocks * kDqColGroups == kWarps && kDqCols % 16 == 0);
  static_assert(kKeyRows % kQueryRows == 0, "a key block starts on a query tile");
  static_assert(kQueryRows % 64 == 0, "dS^T rows are swizzled like the others");

  static constexpr std::size_t kKvBytes = std::size_t{kKeyRows} * D * kBf16;
  static constexpr std::size_t kQBytes = std::size_t{kQueryRows} * D * kBf16;
  static constexpr std::size_t kRowBytes = std::size_t{kQueryRows} * 4;  // lse or delta, f32
  static constexpr std::size_t kK = 0;
  static constexpr std::size_t kV = kKvBytes;
  static constexpr std::size_t kStage0 = 2 * kKvBytes;
  // Within a stage: Q, dO, lse, delta.
  static constexpr std::size_t kStageQ = 0;
  static constexpr std::size_t kStageDo = kQBytes;
  static constexpr std::size_t kStageLse = 2 * kQBytes;
  static constexpr std::size_t kStageDelta = 2 * kQBytes + kRowBytes;
  static constexpr std::size_t kStageBytes = 2 * kQBytes + 2 * kRowBytes;
  static constexpr std::size_t kDsT = kStage0 + kStages * kStageBytes;
  static constexpr std::size_t kSharedBytes = kDsT + std::size_t{kKeyRows} * kQueryRows * kBf16;
};

inline constexpr bool head_dim_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

inline constexpr std::size_t forward_shared_bytes(int head_dim) {
  return head_dim == 64    ? ForwardTiles<64>::kSharedBytes
         : head_dim == 128 ? ForwardTiles<128>::kSharedBytes
                           : 0;
}
inline constexpr std::size_t backward_shared_bytes(int head_dim) {
  return head_dim == 64    ? BackwardTiles<64>::kSharedBytes
         : head_dim == 128 ? BackwardTiles<128>::kSharedBytes
                           : 0;
}

// CTAs of a launch: the forward has one per (query tile, head), the backward one per (key block,
// kv head), both on gridDim.x (heaviest first), so the count must stay within INT_MAX.
inline constexpr std::int64_t forward_blocks(std::int64_t seq, std::int64_t batch_heads) {
  return (seq + ForwardTiles<64>::kQueryRows - 1) / ForwardTiles<64>::kQueryRows * batch_heads;
}
inline constexpr std::int64_t backward_blocks(std::int64_t seq, std::int64_t batch_kv_heads) {
  return (seq + BackwardTiles<64>::kKeyRows - 1) / BackwardTiles<64>::kKeyRows * batch_kv_heads;
}
static_assert(ForwardTiles<64>::kQueryRows == ForwardTiles<128>::kQueryRows &&
              BackwardTiles<64>::kKeyRows == BackwardTiles<128>::kKeyRows);

// What the dispatch needs to know about the device: mma.sync bf16 m16n8k16, ldmatrix and cp.async
// need compute capability 8.0; the layouts above need their shared memory per block.
struct DeviceLimits {
  int cc_major = 0;
  std::size_t shared_optin = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
};

// The forward also needs scale > 0 (the layer's 1/sqrt(D) is): it tracks the row max of the raw
// scores, which is the max of the scaled ones only then.
inline constexpr bool forward_applies(bool bf16, int head_dim, std::int64_t seq,
                                      std::int64_t batch_heads, float scale, DeviceLimits dev) {
  const std::int64_t blocks = forward_blocks(seq, batch_heads);
  return bf16 && head_dim_supported(head_dim) && scale > 0.0f && dev.cc_major >= 8 &&
         forward_shared_bytes(head_dim) <= dev.shared_optin && blocks > 0 && blocks <= INT_MAX;
}
inline constexpr bool backward_applies(bool bf16, int head_dim, std::int64_t seq,
                                       std::int64_t batch_kv_heads, DeviceLimits dev) {
  const std::int64_t blocks = backward_blocks(seq, batch_kv_heads);
  return bf16 && head_dim_supported(head_dim) && dev.cc_major >= 8 &&
         backward_shared_bytes(head_dim) <= dev.shared_optin && blocks > 0 && blocks <= INT_MAX;
}

}  // namespace ppbench::cuda::fa2
