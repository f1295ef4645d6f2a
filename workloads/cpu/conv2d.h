// 2-D convolution without bias on NHWC tensors, as im2col + one GEMM:
//   cols [N*Ho*Wo, kh*kw*Cin] (column order ky, kx, c)  x  W [kh*kw*Cin, Cout]  =  y [N, Ho, Wo,
//   Cout]
// Padding is "same" for odd kernels ((k-1)/2 per side, zeros), so 1x1, 3x3, 1x7 and 7x1 keep the
// spatial size at stride 1 and give ceil(H/2) at stride 2; Ho = (H + 2 pad - k) / stride + 1.
#pragma once

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

template <typename T>
class Conv2d final : public Layer<T> {
 public:
  // W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = kh*kw*Cin.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kh, std::int64_t kw,
         std::int64_t stride, std::uint64_t seed);
  std::string name() const override { return "conv2d"; }

  // F keeps x, not the kh*kw times larger im2col matrix: W rebuilds it. I keeps dy for W.
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override { return {&weight}; }

  std::vector<std::int64_t> output_shape(const std::vector<std::int64_t>& in_shape) const;

  Param<T> weight;  // [kh*kw*Cin, Cout]

 private:
  Tensor<T> im2col(const Tensor<T>& x) const;
  void col2im(const Tensor<T>& cols, Tensor<T>& dx) const;
  bool pointwise() const { return kh_ == 1 && kw_ == 1 && stride_ == 1; }

  std::int64_t cin_, cout_, kh_, kw_, stride_, pad_h_, pad_w_;
};

}  // namespace ppbench::cpu
