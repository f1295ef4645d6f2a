// 2-D convolution without bias on NHWC tensors, as cpu::Conv2d: "same" padding ((k-1)/2 per
// side), Ho = (H + 2 pad - k) / stride + 1. A 1x1 stride-1 conv is one GEMM on the [N*H*W, Cin]
// view; every other shape (3x3, 1x7, 7x1, strided) goes through im2col into a
// [N*Ho*Wo, kh*kw*Cin] matrix (column order ky, kx, c, as the CPU) and one cuBLASLt GEMM.
//
// The weight is stored [Cout, kh*kw*Cin] (the transpose of the CPU's [kh*kw*Cin, Cout]), the
// layout of Linear and of PyTorch's [Cout, kh, kw, Cin] channels-last weights, so the tests' copy
// between backends transposes it like a linear weight.
//
// Saved policy as the CPU: F keeps x, not the kh*kw times larger column matrix (W rebuilds it);
// I computes dcols = dy W into scratch and folds it back with col2im (a gather per input pixel,
// so no atomics and a deterministic sum), keeping dy for W; W adds dW += dy^T cols.
#pragma once

#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

class Conv2d final : public Layer {
 public:
  // W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) drawn exactly as cpu::Conv2d(.., seed) draws it.
  Conv2d(DeviceArena& params, std::int64_t in_channels, std::int64_t out_channels, std::int64_t kh,
         std::int64_t kw, std::int64_t stride, DType dtype, std::uint64_t seed);
  std::string name() const override { return "conv2d"; }

  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override { return {&weight}; }

  Shape output_shape(const Shape& in_shape) const;

  Param weight;  // [Cout, kh*kw*Cin]

 private:
  bool pointwise() const { return kh_ == 1 && kw_ == 1 && stride_ == 1; }
  DTensor im2col(Context& ctx, const DTensor& x) const;

  std::int64_t cin_, cout_, kh_, kw_, stride_, pad_h_, pad_w_;
  DType dtype_;
};

}  // namespace ppbench::cuda
