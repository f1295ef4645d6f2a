// Pooling on NHWC tensors, as workloads/cpu/pool.h; channels kept, no parameters.
//   Ho = (H + 2 pad - k) / stride + 1.
// Every backward is a gather (each input element sums the outputs whose window holds it), so no
// atomics are needed and the result is deterministic.
#pragma once

#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

// Max pool: padded positions never win; ties go to the first position in row-major window order,
// as on the CPU. F keeps the arg-max's offset inside its window (int32, 0 .. k*k-1) per output.
class MaxPool2d final : public Layer {
 public:
  MaxPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t pad);
  std::string name() const override { return "maxpool"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;

 private:
  std::int64_t k_, stride_, pad_;
};

// Average pool with count_include_pad = false (each output averages only the positions inside
// the image, like the CPU). Keeps only the input shape.
class AvgPool2d final : public Layer {
 public:
  AvgPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t pad);
  std::string name() const override { return "avgpool"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;

 private:
  std::int64_t k_, stride_, pad_;
};

// [N, H, W, C] -> [N, C], the mean over all positions. Keeps only the input shape.
class GlobalAvgPool final : public Layer {
 public:
  std::string name() const override { return "global_avgpool"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
};

}  // namespace ppbench::cuda
