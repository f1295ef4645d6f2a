#include "workloads/cuda/concat.h"
#include "workloads/cuda/kernel_util.cuh"

namespace ppbench::cuda {

namespace {

// Copies the [rows, width] block starting at column `src_off` of a row-major [rows, src_cols]
// matrix to column `dst_off` of a [rows, dst_cols] one: concat copies each input into the output
// (src_off 0), split copies each piece out (dst_off 0). Raw element copies in the element type,
// so bf16 stays bit-exact.
template <typename T>
__global__ void copy_cols_kernel(const T* __restrict__ src, std::int64_t src_cols,
                                 std::int64_t src_off, T* __restrict__ dst, std::int64_t dst_cols,
                                 std::int64_t dst_off, std::int64_t rows, std::int64_t width) {
  const std::int64_t n = rows * width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / width, c = i % width;
    dst[r * dst_cols + dst_off + c] = src[r * src_cols + src_off + c];
  }
}

void copy_cols(Context& ctx, const DTensor& src, std::int64_t src_off, const DTensor& dst,
               std::int64_t dst_off, std::int64_t width) {
  const std::int64_t rows = src.rows();
  if (rows * width == 0) return;
  dispatch_float(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    copy_cols_kernel<T><<<grid_for(rows * width), 256, 0, ctx.stream>>>(
        src.as<T>(), src.cols(), src_off, dst.as<T>(), dst.cols(), dst_off, rows, width);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace

DTensor concat_channels(Context& ctx, const std::vector<const DTensor*>& xs) {
  require(!xs.empty(), "concat: no inputs");
  Shape shape = xs[0]->shape();
  require(!shape.empty(), "concat: inputs need a channel dimension");
  std::int64_t total = 0;
  for (const DTensor* x : xs) {
    Shape s = x->shape();
    require(s.size() == shape.size() && x->dtype() == xs[0]->dtype(),
            "concat: inputs differ in rank or dtype");
    total += s.back();
    s.back() = shape.back();
    require(s == shape, "concat: inputs differ outside the channels: " + shape_text(x->shape()));
  }
  shape.back() = total;
  DTensor y(ctx.arena, shape, xs[0]->dtype(), "concat output");
  std::int64_t off = 0;
  for (const DTensor* x : xs) {
    copy_cols(ctx, *x, 0, y, off, x->cols());
    off += x->cols();
  }
  return y;
}

std::vector<DTensor> split_channels(Context& ctx, const DTensor& dy,
                                    const std::vector<std::int64_t>& widths) {
  std::int64_t total = 0;
  for (std::int64_t w : widths) total += w;
  require(!dy.shape().empty() && total == dy.cols(),
          "split: widths do not sum to the channels of " + shape_text(dy.shape()));
  std::vector<DTensor> out;
  std::int64_t off = 0;
  for (std::int64_t w : widths) {
    Shape s = dy.shape();
    s.back() = w;
    DTensor piece(ctx.arena, s, dy.dtype(), "split output");
    copy_cols(ctx, dy, off, piece, 0, w);
    off += w;
    out.push_back(std::move(piece));
  }
  return out;
}

}  // namespace ppbench::cuda
