#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/rope.cuh"
#include "workloads/cuda/rope.h"

namespace ppbench::cuda {

namespace {

// One thread per rotated pair (b, p, h, i).
template <typename T>
__global__ void rope_kernel(const T* x, T* y, std::int64_t pairs, std::int64_t seq,
                            std::int64_t heads, std::int64_t d, double theta, float sign) {
  const std::int64_t half = d / 2;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < pairs;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = k % half;
    const std::int64_t row = k / half;  // (b, p, h)
    const std::int64_t p = (row / heads) % seq;
    float c, s;
    rope_cos_sin(p, i, d, theta, &c, &s);
    s *= sign;
    const std::int64_t base = row * d;
    const float x1 = to_f(x[base + i]), x2 = to_f(x[base + i + half]);
    y[base + i] = from_f<T>(x1 * c - x2 * s);
    y[base + i + half] = from_f<T>(x1 * s + x2 * c);
  }
}

}  // namespace

void rope_rotate(Context& ctx, const DTensor& x, const DTensor& y, std::int64_t heads,
                 std::int64_t head_dim, double theta, bool inverse) {
  require(x.shape().size() == 3 && x.dim(2) == heads * head_dim,
          "rope: expects [batch, seq, heads * head_dim], got " + shape_text(x.shape()));
  require(head_dim % 2 == 0, "rope: head_dim must be even");
  require(y.shape() == x.shape() && y.dtype() == x.dtype(), "rope: output differs from input");
  const std::int64_t pairs = x.numel() / 2;
  if (pairs == 0) return;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<grid_for(pairs), 256, 0, ctx.stream>>>(
        x.as<T>(), y.as<T>(), pairs, x.dim(1), heads, head_dim, theta, inverse ? -1.0f : 1.0f);
  });
  CUDA_CHECK_LAUNCH();
}

RotaryEmbedding::RotaryEmbedding(std::int64_t heads, std::int64_t head_dim, double theta)
    : heads_(heads), head_dim_(head_dim), theta_(theta) {}

DTensor RotaryEmbedding::forward(Context& ctx, const DTensor& x, Saved& saved) {
  DTensor y(ctx.arena, x.shape(), x.dtype(), "rope output");
  rope_rotate(ctx, x, y, heads_, head_dim_, theta_, false);
  saved.clear();
  saved.in_shape = x.shape();
  return y;
}

DTensor RotaryEmbedding::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  DTensor dx(ctx.arena, dy.shape(), dy.dtype(), "rope input gradient");
  rope_rotate(ctx, dy, dx, heads_, head_dim_, theta_, true);
  saved.clear();
  return dx;
}

}  // namespace ppbench::cuda
