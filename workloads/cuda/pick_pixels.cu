#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/pick_pixels.h"

namespace ppbench::cuda {

namespace {

// Full-size [n, h, w, c] and half-size [n, ho, wo, c] extents, ho = ceil(h / 2).
struct PickGeom {
  std::int64_t n, h, w, c, ho, wo;
};

PickGeom geometry(const Shape& s, const char* what) {
  require(s.size() == 4, std::string(what) + ": expects NHWC, got " + shape_text(s));
  return {s[0], s[1], s[2], s[3], (s[1] + 1) / 2, (s[2] + 1) / 2};
}

// Half-size element i = ((b * ho + r) * wo + q) * c + ch; channels fastest, so consecutive
// threads copy one pixel's channels (coalesced on both sides).
template <typename T>
__global__ void pick_kernel(const T* __restrict__ x, T* __restrict__ y, PickGeom g, int offset,
                            std::int64_t total) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t ch = i % g.c, q = (i / g.c) % g.wo, r = (i / g.c / g.wo) % g.ho;
    const std::int64_t b = i / (g.c * g.wo * g.ho);
    const std::int64_t iy = 2 * r + offset, ix = 2 * q + offset;
    y[i] = iy < g.h && ix < g.w ? x[((b * g.h + iy) * g.w + ix) * g.c + ch] : from_f<T>(0.0f);
  }
}

// Full-size element i = ((b * h + iy) * w + ix) * c + ch. A pixel with both coordinates even
// came from (iy / 2, ix / 2) of the even pick, both odd from ((iy - 1) / 2, (ix - 1) / 2) of the
// odd pick, which is again (iy / 2, ix / 2) in integer division; (h - 1) / 2 < ho keeps it in
// range. Mixed parities were picked by neither.
template <typename T>
__global__ void unpick_kernel(const T* __restrict__ d_even, const T* __restrict__ d_odd,
                              T* __restrict__ dx, PickGeom g, std::int64_t total) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t ch = i % g.c, ix = (i / g.c) % g.w, iy = (i / g.c / g.w) % g.h;
    const std::int64_t b = i / (g.c * g.w * g.h);
    T v = from_f<T>(0.0f);
    if (iy % 2 == ix % 2) {
      const T* src = iy % 2 == 0 ? d_even : d_odd;
      v = src[((b * g.ho + iy / 2) * g.wo + ix / 2) * g.c + ch];
    }
    dx[i] = v;
  }
}

}  // namespace

DTensor pick_pixels(Context& ctx, const DTensor& x, std::int64_t offset) {
  require(offset == 0 || offset == 1, "pick_pixels: offset must be 0 or 1");
  const PickGeom g = geometry(x.shape(), "pick_pixels");
  DTensor y(ctx.arena, {g.n, g.ho, g.wo, g.c}, x.dtype(), "picked pixels");
  if (y.numel() == 0) return y;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    pick_kernel<T><<<grid_for(y.numel()), 256, 0, ctx.stream>>>(
        x.as<T>(), y.as<T>(), g, static_cast<int>(offset), y.numel());
  });
  CUDA_CHECK_LAUNCH();
  return y;
}

DTensor unpick_pixels(Context& ctx, const DTensor& d_even, const DTensor& d_odd,
                      const Shape& shape) {
  const PickGeom g = geometry(shape, "unpick_pixels");
  const Shape half{g.n, g.ho, g.wo, g.c};
  require(d_even.shape() == half && d_odd.shape() == half && d_even.dtype() == d_odd.dtype(),
          "unpick_pixels: gradients " + shape_text(d_even.shape()) + " and " +
              shape_text(d_odd.shape()) + " are not the picks of " + shape_text(shape));
  DTensor dx(ctx.arena, shape, d_even.dtype(), "unpicked pixels");
  if (dx.numel() == 0) return dx;
  dispatch_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    unpick_kernel<T><<<grid_for(dx.numel()), 256, 0, ctx.stream>>>(d_even.as<T>(), d_odd.as<T>(),
                                                                   dx.as<T>(), g, dx.numel());
  });
  CUDA_CHECK_LAUNCH();
  return dx;
}

}  // namespace ppbench::cuda
