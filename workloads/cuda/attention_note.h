// What the CUDA attention is, in one sentence, for `ppbench model`, run records and benchmark
// context. A plain header (no CUDA includes) so that builds without CUDA can print it too.
#pragma once

namespace ppbench::cuda {

inline constexpr const char* kAttentionNote =
    "fused FlashAttention-style kernels (tiled online softmax, causal tiles skipped, bf16 tile "
    "products on tensor cores via WMMA, P recomputed in the backward from the saved "
    "log-sum-exp; O(s) memory per head)";

}  // namespace ppbench::cuda
