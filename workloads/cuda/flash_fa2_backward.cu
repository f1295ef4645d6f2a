// Launches the FlashAttention-2 backward kernel (flash_fa2_backward_kernel.cuh) for head_dim 64 or
// 128.
#include "workloads/cuda/check.h"
#include "workloads/cuda/flash_fa2.h"
#include "workloads/cuda/flash_fa2_backward_kernel.cuh"

namespace ppbench::cuda {

namespace {

using fa2::BackwardTiles;
using fa2::bf16;

template <int D>
void launch_backward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                     const DTensor& d_o, const DTensor& lse, const DTensor& delta,
                     const DTensor& dq_acc, const DTensor& dk, const DTensor& dv, float scale) {
  using Tiles = BackwardTiles<D>;
  const fa2::Dims dims{static_cast<int>(q.dim(0)), static_cast<int>(q.dim(1)),
                       static_cast<int>(k.dim(1)), static_cast<int>(q.dim(2))};
  const std::int64_t blocks = fa2::backward_blocks(dims.seq, k.dim(0) * k.dim(1));
  CUDA_CHECK(cudaFuncSetAttribute(fa2::fa2_backward_kernel<D>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(Tiles::kSharedBytes)));
  fa2::fa2_backward_kernel<D>
      <<<static_cast<unsigned>(blocks), Tiles::kThreads, Tiles::kSharedBytes, ctx.stream>>>(
          q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), d_o.as<bf16>(), lse.as<float>(),
          delta.as<float>(), dq_acc.as<float>(), dk.as<bf16>(), dv.as<bf16>(), dims, scale,
          scale * fa2::kLog2e);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void fa2_backward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                  const DTensor& d_o, const DTensor& lse, const DTensor& delta,
                  const DTensor& dq_acc, const DTensor& dk, const DTensor& dv, float scale) {
  if (q.dim(3) == 64) {
    launch_backward<64>(ctx, q, k, v, d_o, lse, delta, dq_acc, dk, dv, scale);
  } else {
    launch_backward<128>(ctx, q, k, v, d_o, lse, delta, dq_acc, dk, dv, scale);
  }
}

}  // namespace ppbench::cuda
