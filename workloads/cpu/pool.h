// Pooling on NHWC tensors; channels are kept. No parameters.
//   Ho = (H + 2 pad - k) / stride + 1.
// AmoebaNet uses max 3x3 (pad 1, stride 1 or 2), max 2x2 (pad 0, stride 2), avg 3x3 (pad 1) and a
// global average pool before the classifier.
#pragma once

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

// Max pool. Padded positions never win. F keeps, per output, the arg-max's offset inside its
// window (0 .. k*k-1, exact in T); ties go to the first in row-major window order.
template <typename T>
class MaxPool2d final : public Layer<T> {
 public:
  MaxPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t pad);
  std::string name() const override { return "maxpool"; }
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;

 private:
  std::int64_t k_, stride_, pad_;
};

// Average pool with count_include_pad = false: each output averages only the positions inside
// the image (TensorFlow's "SAME" average pooling, which the AmoebaNet reference uses), so border
// outputs are not pulled towards zero. Saves nothing but the input shape.
template <typename T>
class AvgPool2d final : public Layer<T> {
 public:
  AvgPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t pad);
  std::string name() const override { return "avgpool"; }
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;

 private:
  std::int64_t k_, stride_, pad_;
};

// [N, H, W, C] -> [N, C], the mean over all positions. Saves nothing but the input shape.
template <typename T>
class GlobalAvgPool final : public Layer<T> {
 public:
  std::string name() const override { return "global_avgpool"; }
  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
};

}  // namespace ppbench::cpu
