#include <cmath>

#include "workloads/counter_rng.h"
#include "workloads/cuda/conv2d.h"
#include "workloads/cuda/gemm.h"
#include "workloads/cuda/init_fill.h"
#include "workloads/cuda/kernel_util.cuh"

namespace ppbench::cuda {

namespace {

enum Slot { kX, kDY, kSlots };

struct ConvGeom {
  int n, h, w, c, ho, wo, kh, kw, stride, pad_h, pad_w;
};

// One thread per element of cols [N*Ho*Wo, kh*kw*C]; consecutive threads walk the channels of
// one input pixel, so loads and stores are coalesced. Padding reads as zero.
template <typename T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ cols, ConvGeom g,
                              std::int64_t total) {
  const std::int64_t kcols = static_cast<std::int64_t>(g.kh) * g.kw * g.c;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / kcols;
    const int rem = static_cast<int>(i % kcols);
    const int ch = rem % g.c, kx = (rem / g.c) % g.kw, ky = rem / (g.c * g.kw);
    const int ox = static_cast<int>(row % g.wo), oy = static_cast<int>((row / g.wo) % g.ho);
    const std::int64_t b = row / (static_cast<std::int64_t>(g.wo) * g.ho);
    const int iy = oy * g.stride - g.pad_h + ky, ix = ox * g.stride - g.pad_w + kx;
    T v = from_f<T>(0.0f);
    if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) v = x[((b * g.h + iy) * g.w + ix) * g.c + ch];
    cols[i] = v;
  }
}

// The adjoint of im2col as a gather: each input element sums the column entries that copied it
// (at most kh*kw of them), in f32, and is written once.
template <typename T>
__global__ void col2im_kernel(const T* __restrict__ cols, T* __restrict__ dx, ConvGeom g,
                              std::int64_t total) {
  const std::int64_t kcols = static_cast<std::int64_t>(g.kh) * g.kw * g.c;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int ch = static_cast<int>(i % g.c);
    const int ix = static_cast<int>((i / g.c) % g.w), iy = static_cast<int>((i / g.c / g.w) % g.h);
    const std::int64_t b = i / (static_cast<std::int64_t>(g.c) * g.w * g.h);
    float s = 0.0f;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int ty = iy + g.pad_h - ky;  // = oy * stride
      if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.ho) continue;
      const int oy = ty / g.stride;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int tx = ix + g.pad_w - kx;
        if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.wo) continue;
        const int ox = tx / g.stride;
        const std::int64_t row = (b * g.ho + oy) * g.wo + ox;
        s += to_f(cols[row * kcols + (static_cast<std::int64_t>(ky) * g.kw + kx) * g.c + ch]);
      }
    }
    dx[i] = from_f<T>(s);
  }
}

ConvGeom geometry(const Shape& in, const Shape& out, std::int64_t kh, std::int64_t kw,
                  std::int64_t stride, std::int64_t pad_h, std::int64_t pad_w) {
  auto i = [](std::int64_t v) { return static_cast<int>(v); };
  return {i(in[0]), i(in[1]), i(in[2]),  i(in[3]), i(out[1]), i(out[2]),
          i(kh),    i(kw),    i(stride), i(pad_h), i(pad_w)};
}

}  // namespace

Conv2d::Conv2d(DeviceArena& params, std::int64_t in_channels, std::int64_t out_channels,
               std::int64_t kh, std::int64_t kw, std::int64_t stride, DType dtype,
               std::uint64_t seed)
    : cin_(in_channels),
      cout_(out_channels),
      kh_(kh),
      kw_(kw),
      stride_(stride),
      pad_h_((kh - 1) / 2),
      pad_w_((kw - 1) / 2),
      dtype_(dtype) {
  require(in_channels > 0 && out_channels > 0 && kh > 0 && kw > 0 && stride > 0,
          "conv2d: sizes must be positive");
  require(dtype != DType::kI32, "conv2d: dtype must be bf16 or f32");
  const std::int64_t k = kh * kw * in_channels;
  // The CPU's values (workloads/cpu/conv2d.cpp): W [k, Cout] there, held [Cout, k] here.
  const double a = 1.0 / std::sqrt(static_cast<double>(k));
  weight = make_param(params, "weight", {out_channels, k}, dtype);
  weight.transposed = true;
  fill_param(weight, param_key(seed, 0), a);
}

Shape Conv2d::output_shape(const Shape& s) const {
  require(s.size() == 4 && s[3] == cin_, "conv2d: expects NHWC input with " + std::to_string(cin_) +
                                             " channels, got " + shape_text(s));
  const std::int64_t ho = (s[1] + 2 * pad_h_ - kh_) / stride_ + 1;
  const std::int64_t wo = (s[2] + 2 * pad_w_ - kw_) / stride_ + 1;
  require(ho > 0 && wo > 0, "conv2d: input smaller than the kernel");
  return {s[0], ho, wo, cout_};
}

DTensor Conv2d::im2col(Context& ctx, const DTensor& x) const {
  const Shape o = output_shape(x.shape());
  DTensor cols(ctx.arena, {o[0] * o[1] * o[2], kh_ * kw_ * cin_}, dtype_, "conv2d im2col");
  const ConvGeom g = geometry(x.shape(), o, kh_, kw_, stride_, pad_h_, pad_w_);
  dispatch_float(dtype_, [&](auto tag) {
    using T = decltype(tag);
    im2col_kernel<T>
        <<<grid_for(cols.numel()), 256, 0, ctx.stream>>>(x.as<T>(), cols.as<T>(), g, cols.numel());
  });
  CUDA_CHECK_LAUNCH();
  return cols;
}

DTensor Conv2d::forward(Context& ctx, const DTensor& x, Saved& saved) {
  require(x.dtype() == dtype_,
          "conv2d: input is " + dtype_name(x.dtype()) + ", layer is " + dtype_name(dtype_));
  const Shape o = output_shape(x.shape());
  DTensor y(ctx.arena, o, dtype_, "conv2d output");
  const std::int64_t m = y.rows();
  if (m > 0) {
    // The column scratch lives only for this GEMM (freed on return), as on the CPU.
    const DTensor a = pointwise() ? x : im2col(ctx, x);
    gemm(ctx, m, cout_, a.cols(), a.data(), false, weight.value.data(), true, dtype_, y.data(),
         dtype_);
  }
  saved.clear();
  saved.in_shape = x.shape();
  saved.t.resize(kSlots);
  saved.t[kX] = x;
  return y;
}

DTensor Conv2d::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  require(dy.shape() == output_shape(saved.in_shape) && dy.dtype() == dtype_,
          "conv2d: bad output gradient " + shape_text(dy.shape()));
  DTensor dx(ctx.arena, saved.in_shape, dtype_, "conv2d input gradient");
  const std::int64_t m = dy.rows(), k = kh_ * kw_ * cin_;
  if (m > 0) {
    if (pointwise()) {
      gemm(ctx, m, cin_, cout_, dy.data(), false, weight.value.data(), false, dtype_, dx.data(),
           dtype_);
    } else {
      // dcols in the layer dtype (f32 accumulation inside the GEMM); col2im sums in f32.
      DTensor dcols(ctx.arena, {m, k}, dtype_, "conv2d column gradient");
      gemm(ctx, m, k, cout_, dy.data(), false, weight.value.data(), false, dtype_, dcols.data(),
           dtype_);
      const ConvGeom g = geometry(saved.in_shape, dy.shape(), kh_, kw_, stride_, pad_h_, pad_w_);
      dispatch_float(dtype_, [&](auto tag) {
        using T = decltype(tag);
        col2im_kernel<T><<<grid_for(dx.numel()), 256, 0, ctx.stream>>>(dcols.as<T>(), dx.as<T>(), g,
                                                                       dx.numel());
      });
      CUDA_CHECK_LAUNCH();
    }
  } else {
    zero(dx, ctx.stream);
  }
  saved.t[kDY] = dy;
  return dx;
}

void Conv2d::backward_weight(Context& ctx, Saved& saved) {
  const DTensor& x = saved.t[kX];
  const DTensor& dy = saved.t[kDY];
  if (dy.rows() > 0) {
    const DTensor a = pointwise() ? x.reshaped({x.rows(), cin_}) : im2col(ctx, x);
    // dW[Cout, k] += dy^T cols, straight into the f32 gradient.
    gemm(ctx, cout_, a.cols(), dy.rows(), dy.data(), true, a.data(), false, dtype_,
         weight.grad.data(), DType::kF32, 1.0f, 1.0f);
  }
  saved.clear();
}

}  // namespace ppbench::cuda
