// The interface every CPU layer implements: three separate passes, so the zero-bubble and
// DualPipe schedules can run I and W at different times.
//
//   F  forward(x, saved) -> y          fills `saved` with what I and W need
//   I  backward_input(dy, saved) -> dx  afterwards `saved` holds only what W still needs
//   W  backward_weight(saved)          param.grad += dL/dparam, then `saved` is empty
//
// B (the full backward) is I then W. Each micro-batch has its own Saved, so passes of different
// micro-batches may interleave freely (F0 F1 I1 I0 W0 W1 ...). W accumulates, so the gradients of
// all micro-batches of a step add up; zero_grad() starts a step.
//
// What W needs is the input and the output gradient of every GEMM (dW = x^T dy), so for a single
// linear layer Saved grows during I (x, then x and dy). The Zero Bubble saving, M_W < M_B, comes
// from blocks: I frees everything that only the input gradient needs (attention probabilities,
// normalised activations, nonlinearity inputs). Norm layers reduce their small gamma/beta
// gradients during I, where the products are at hand, and W only adds them in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/cpu/tensor.h"

namespace ppbench::cpu {

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string name() const = 0;

  virtual Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) = 0;
  virtual Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) = 0;
  // Layers without parameters have nothing to do but free.
  virtual void backward_weight(Saved<T>& saved) { saved.clear(); }
  virtual std::vector<Param<T>*> params() { return {}; }

  // B = I then W.
  Tensor<T> backward(const Tensor<T>& dy, Saved<T>& saved) {
    Tensor<T> dx = backward_input(dy, saved);
    backward_weight(saved);
    return dx;
  }
  void zero_grad() {
    for (Param<T>* p : params()) std::fill(p->grad.data.begin(), p->grad.data.end(), T(0));
  }
  std::int64_t num_params() {
    std::int64_t n = 0;
    for (Param<T>* p : params()) n += p->value.numel();
    return n;
  }
};

template <typename T>
using LayerPtr = std::unique_ptr<Layer<T>>;

}  // namespace ppbench::cpu
