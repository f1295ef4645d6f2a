// Launches the FlashAttention-2 forward kernel (flash_fa2_forward_kernel.cuh) for head_dim 64 or
// 128.
#include "workloads/cuda/check.h"
#include "workloads/cuda/flash_fa2.h"
#include "workloads/cuda/flash_fa2_forward_kernel.cuh"

namespace ppbench::cuda {

namespace {

using fa2::bf16;
using fa2::ForwardTiles;

template <int D>
void launch_forward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                    const DTensor& o, const DTensor& lse, float scale) {
  using Tiles = ForwardTiles<D>;
  const fa2::Dims dims{static_cast<int>(q.dim(0)), static_cast<int>(q.dim(1)),
                       static_cast<int>(k.dim(1)), static_cast<int>(q.dim(2))};
  const std::int64_t blocks = fa2::forward_blocks(dims.seq, q.dim(0) * q.dim(1));
  // Set for every launch: the attribute belongs to the current device (and context).
  CUDA_CHECK(cudaFuncSetAttribute(fa2::fa2_forward_kernel<D>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(Tiles::kSharedBytes)));
  fa2::fa2_forward_kernel<D>
      <<<static_cast<unsigned>(blocks), Tiles::kThreads, Tiles::kSharedBytes, ctx.stream>>>(
          q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), o.as<bf16>(), lse.as<float>(), dims, scale,
          scale * fa2::kLog2e);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void fa2_forward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                 const DTensor& o, const DTensor& lse, float scale) {
  if (q.dim(3) == 64) {
    launch_forward<64>(ctx, q, k, v, o, lse, scale);
  } else {
    launch_forward<128>(ctx, q, k, v, o, lse, scale);
  }
}

}  // namespace ppbench::cuda
