// What the CUDA attention is, in one sentence, for `ppbench model`, run records and benchmark
// context. A plain header (no CUDA includes) so that builds without CUDA can print it too.
#pragma once

namespace ppbench::cuda {

inline constexpr const char* kAttentionNote =
    "fused FlashAttention-style kernels (tiled online softmax, causal tiles skipped, P "
    "recomputed in the backward from the saved log-sum-exp; O(s) memory per head): "
    "FlashAttention-2 with mma.sync fragments in registers for bf16 at head_dim 64 or 128, "
    "general tiles otherwise (WMMA for bf16, FMA for f32) or with PPBENCH_FLASH=general";

}  // namespace ppbench::cuda
