#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/pool.h"

namespace ppbench::cuda {

namespace {

struct PoolGeom {
  int n, h, w, c, ho, wo, k, stride, pad;
};

PoolGeom geometry(const Shape& s, std::int64_t k, std::int64_t stride, std::int64_t pad,
                  const char* what) {
  require(s.size() == 4, std::string(what) + ": expects NHWC input, got " + shape_text(s));
  require(k > 0 && stride > 0 && pad >= 0 && pad < k, std::string(what) + ": bad window");
  const std::int64_t ho = (s[1] + 2 * pad - k) / stride + 1, wo = (s[2] + 2 * pad - k) / stride + 1;
  require(ho > 0 && wo > 0, std::string(what) + ": input smaller than the window");
  auto i = [](std::int64_t v) { return static_cast<int>(v); };
  return {i(s[0]), i(s[1]), i(s[2]), i(s[3]), i(ho), i(wo), i(k), i(stride), i(pad)};
}

#define PPB_GRID_LOOP(i, n)                                                                        \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// Output element i = ((b * Ho + oy) * Wo + ox) * C + ch; one thread each, channels fastest.
template <typename T>
__global__ void maxpool_forward_kernel(const T* __restrict__ x, T* __restrict__ y,
                                       std::int32_t* __restrict__ arg, PoolGeom g, std::int64_t n) {
  PPB_GRID_LOOP(i, n) {
    const int ch = static_cast<int>(i % g.c), ox = static_cast<int>((i / g.c) % g.wo);
    const int oy = static_cast<int>((i / g.c / g.wo) % g.ho);
    const std::int64_t b = i / (static_cast<std::int64_t>(g.c) * g.wo * g.ho);
    // The first in-image position to start, and NaN wins (as in PyTorch and the CPU kernel):
    // a window of NaN still names a position inside the image, whose input gets the gradient.
    float best = -INFINITY;
    int best_at = -1;
    for (int ky = 0; ky < g.k; ++ky)
      for (int kx = 0; kx < g.k; ++kx) {
        const int iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
        if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
        const float v = to_f(x[((b * g.h + iy) * g.w + ix) * g.c + ch]);
        if (best_at < 0 || v > best || (isnan(v) && !isnan(best)))
          best = v, best_at = ky * g.k + kx;
      }
    y[i] = from_f<T>(best);
    arg[i] = best_at;
  }
}

// Input element i = ((b * H + iy) * W + ix) * C + ch: visits the outputs whose window covers
// (iy, ix) (oy * stride = iy + pad - ky for some ky in [0, k)). `arg` null: average pool, each
// output's share is dy / (its count of in-image positions).
template <typename T>
__global__ void pool_backward_kernel(const T* __restrict__ dy, const std::int32_t* __restrict__ arg,
                                     T* __restrict__ dx, PoolGeom g, std::int64_t n) {
  PPB_GRID_LOOP(i, n) {
    const int ch = static_cast<int>(i % g.c), ix = static_cast<int>((i / g.c) % g.w);
    const int iy = static_cast<int>((i / g.c / g.w) % g.h);
    const std::int64_t b = i / (static_cast<std::int64_t>(g.c) * g.w * g.h);
    float s = 0.0f;
    for (int ky = 0; ky < g.k; ++ky) {
      const int ty = iy + g.pad - ky;
      if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.ho) continue;
      const int oy = ty / g.stride;
      for (int kx = 0; kx < g.k; ++kx) {
        const int tx = ix + g.pad - kx;
        if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.wo) continue;
        const int ox = tx / g.stride;
        const std::int64_t o = ((b * g.ho + oy) * g.wo + ox) * g.c + ch;
        if (arg != nullptr) {
          if (arg[o] == ky * g.k + kx) s += to_f(dy[o]);
        } else {
          const int y0 = max(oy * g.stride - g.pad, 0), y1 = min(oy * g.stride - g.pad + g.k, g.h);
          const int x0 = max(ox * g.stride - g.pad, 0), x1 = min(ox * g.stride - g.pad + g.k, g.w);
          s += to_f(dy[o]) / static_cast<float>((y1 - y0) * (x1 - x0));
        }
      }
    }
    dx[i] = from_f<T>(s);
  }
}

template <typename T>
__global__ void avgpool_forward_kernel(const T* __restrict__ x, T* __restrict__ y, PoolGeom g,
                                       std::int64_t n) {
  PPB_GRID_LOOP(i, n) {
    const int ch = static_cast<int>(i % g.c), ox = static_cast<int>((i / g.c) % g.wo);
    const int oy = static_cast<int>((i / g.c / g.wo) % g.ho);
    const std::int64_t b = i / (static_cast<std::int64_t>(g.c) * g.wo * g.ho);
    const int y0 = max(oy * g.stride - g.pad, 0), y1 = min(oy * g.stride - g.pad + g.k, g.h);
    const int x0 = max(ox * g.stride - g.pad, 0), x1 = min(ox * g.stride - g.pad + g.k, g.w);
    float s = 0.0f;
    for (int iy = y0; iy < y1; ++iy)
      for (int ix = x0; ix < x1; ++ix) s += to_f(x[((b * g.h + iy) * g.w + ix) * g.c + ch]);
    y[i] = from_f<T>(s / static_cast<float>((y1 - y0) * (x1 - x0)));
  }
}

// y[b, c] = mean over the hw positions; threads along c, so each pixel's channels are one load.
template <typename T>
__global__ void global_avgpool_forward_kernel(const T* __restrict__ x, T* __restrict__ y,
                                              std::int64_t n, std::int64_t hw, std::int64_t c) {
  PPB_GRID_LOOP(i, n * c) {
    const std::int64_t b = i / c, ch = i % c;
    const T* xb = x + b * hw * c + ch;
    float s = 0.0f;
    for (std::int64_t p = 0; p < hw; ++p) s += to_f(xb[p * c]);
    y[i] = from_f<T>(s / static_cast<float>(hw));
  }
}

template <typename T>
__global__ void global_avgpool_backward_kernel(const T* __restrict__ dy, T* __restrict__ dx,
                                               std::int64_t total, std::int64_t hw,
                                               std::int64_t c) {
  PPB_GRID_LOOP(i, total) {
    const std::int64_t ch = i % c, b = i / (hw * c);
    dx[i] = from_f<T>(to_f(dy[b * c + ch]) / static_cast<float>(hw));
  }
}

}  // namespace

MaxPool2d::MaxPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t pad)
    : k_(kernel), stride_(stride), pad_(pad) {}

DTensor MaxPool2d::forward(Context& ctx, const DTensor& x, Saved& saved) {
  const PoolGeom g = geometry(x.shape(), k_, stride_, pad_, "maxpool");
  const Shape o{g.n, g.ho, g.wo, g.c};
  DTensor y(ctx.arena, o, x.dtype(), "maxpool output");
  DTensor arg(ctx.arena, o, DType::kI32, "maxpool arg-max");
  if (y.numel() > 0) {
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      maxpool_forward_kernel<T><<<grid_for(y.numel()), 256, 0, ctx.stream>>>(
          x.as<T>(), y.as<T>(), arg.as<std::int32_t>(), g, y.numel());
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  saved.in_shape = x.shape();
  saved.t.push_back(std::move(arg));
  return y;
}

DTensor MaxPool2d::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  const PoolGeom g = geometry(saved.in_shape, k_, stride_, pad_, "maxpool");
  require(dy.shape() == saved.t.at(0).shape(), "maxpool: bad output gradient");
  DTensor dx(ctx.arena, saved.in_shape, dy.dtype(), "maxpool input gradient");
  if (dx.numel() > 0) {
    dispatch_float(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      pool_backward_kernel<T><<<grid_for(dx.numel()), 256, 0, ctx.stream>>>(
          dy.as<T>(), saved.t[0].as<std::int32_t>(), dx.as<T>(), g, dx.numel());
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  return dx;
}

AvgPool2d::AvgPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t pad)
    : k_(kernel), stride_(stride), pad_(pad) {}

DTensor AvgPool2d::forward(Context& ctx, const DTensor& x, Saved& saved) {
  const PoolGeom g = geometry(x.shape(), k_, stride_, pad_, "avgpool");
  DTensor y(ctx.arena, {g.n, g.ho, g.wo, g.c}, x.dtype(), "avgpool output");
  if (y.numel() > 0) {
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      avgpool_forward_kernel<T>
          <<<grid_for(y.numel()), 256, 0, ctx.stream>>>(x.as<T>(), y.as<T>(), g, y.numel());
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  saved.in_shape = x.shape();
  return y;
}

DTensor AvgPool2d::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  const PoolGeom g = geometry(saved.in_shape, k_, stride_, pad_, "avgpool");
  require(dy.shape() == Shape({g.n, g.ho, g.wo, g.c}), "avgpool: bad output gradient");
  DTensor dx(ctx.arena, saved.in_shape, dy.dtype(), "avgpool input gradient");
  if (dx.numel() > 0) {
    dispatch_float(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      pool_backward_kernel<T><<<grid_for(dx.numel()), 256, 0, ctx.stream>>>(
          dy.as<T>(), nullptr, dx.as<T>(), g, dx.numel());
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  return dx;
}

DTensor GlobalAvgPool::forward(Context& ctx, const DTensor& x, Saved& saved) {
  require(x.shape().size() == 4, "global_avgpool: expects NHWC input");
  const std::int64_t n = x.dim(0), hw = x.dim(1) * x.dim(2), c = x.dim(3);
  require(hw > 0, "global_avgpool: empty image");
  DTensor y(ctx.arena, {n, c}, x.dtype(), "global_avgpool output");
  if (y.numel() > 0) {
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      global_avgpool_forward_kernel<T>
          <<<grid_for(n * c), 256, 0, ctx.stream>>>(x.as<T>(), y.as<T>(), n, hw, c);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  saved.in_shape = x.shape();
  return y;
}

DTensor GlobalAvgPool::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  const Shape& s = saved.in_shape;
  const std::int64_t n = s[0], hw = s[1] * s[2], c = s[3];
  require(dy.numel() == n * c, "global_avgpool: bad output gradient");
  DTensor dx(ctx.arena, s, dy.dtype(), "global_avgpool input gradient");
  if (dx.numel() > 0) {
    dispatch_float(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      global_avgpool_backward_kernel<T>
          <<<grid_for(dx.numel()), 256, 0, ctx.stream>>>(dy.as<T>(), dx.as<T>(), dx.numel(), hw, c);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  return dx;
}

}  // namespace ppbench::cuda
