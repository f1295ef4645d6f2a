// The interface every GPU layer implements, the same F / I / W contract as workloads/cpu/layer.h:
//
//   F  forward(ctx, x, saved) -> y           fills `saved` with what I and W need
//   I  backward_input(ctx, dy, saved) -> dx  afterwards `saved` holds only what W still needs
//   W  backward_weight(ctx, saved)           param.grad += dL/dparam, then `saved` is empty
//
// All work is enqueued on ctx.stream (nothing synchronises); outputs and saved tensors come from
// ctx.arena. Parameters live in a separate arena given at construction (they are not
// activations). Each layer has one dtype (bf16 or f32) for its parameters and activations; its
// gradients accumulate in f32.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string name() const = 0;

  virtual DTensor forward(Context& ctx, const DTensor& x, Saved& saved) = 0;
  virtual DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) = 0;
  virtual void backward_weight(Context& /*ctx*/, Saved& saved) { saved.clear(); }
  virtual std::vector<Param*> params() { return {}; }

  DTensor backward(Context& ctx, const DTensor& dy, Saved& saved) {
    DTensor dx = backward_input(ctx, dy, saved);
    backward_weight(ctx, saved);
    return dx;
  }
  void zero_grad(Context& ctx) {
    for (Param* p : params()) zero(p->grad, ctx.stream);
  }
};

using LayerPtr = std::unique_ptr<Layer>;

// A parameter of `shape` in `dtype` with its f32 gradient (zeroed), allocated from `arena`.
Param make_param(DeviceArena& arena, std::string name, Shape shape, DType dtype);

}  // namespace ppbench::cuda
