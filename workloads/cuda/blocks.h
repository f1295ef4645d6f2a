// Composite GPU layers, as workloads/cpu/blocks.h: Sequential (F in order, I in reverse, W of
// every child), Residual (y = x + f(x)), the MLP block and the pre-norm decoder layer (Llama:
// RMSNorm, rotary GQA, SwiGLU; GPipe's Transformer: LayerNorm, MHA with biases, GeLU MLP), built
// from the CPU's DecoderConfig with the same seeds, so both backends hold the same parameters.
#pragma once

#include <memory>
#include <vector>

#include "workloads/cuda/layer.h"
#include "workloads/layer_configs.h"

namespace ppbench::cuda {

class Sequential final : public Layer {
 public:
  explicit Sequential(std::string name = "sequential") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Sequential& add(LayerPtr layer) {
    layers_.push_back(std::move(layer));
    return *this;
  }
  const std::vector<LayerPtr>& layers() const { return layers_; }

  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override;

 private:
  std::string name_;
  std::vector<LayerPtr> layers_;
};

// y = x + f(x); keeps nothing itself: dx = dy + f.I(dy).
class Residual final : public Layer {
 public:
  explicit Residual(LayerPtr inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "residual(" + inner_->name() + ")"; }
  Layer& inner() { return *inner_; }

  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override { return inner_->params(); }

 private:
  LayerPtr inner_;
};

// y += x elementwise (same shape and dtype), on ctx.stream.
void add_into(Context& ctx, const DTensor& y, const DTensor& x);
// a + b, in a's buffer when nothing else holds it, else in a fresh one named `what`: a layer must
// not add into a tensor that another layer saved (ReLU keeps its output) or handed back as is
// (an identity returns its input).
DTensor add_unshared(Context& ctx, DTensor a, const DTensor& b, const char* what);

LayerPtr make_mlp_block(DeviceArena& params, std::int64_t in, std::int64_t out, DType dtype,
                        std::uint64_t seed);
LayerPtr make_decoder_layer(DeviceArena& params, const DecoderConfig& config, DType dtype,
                            std::uint64_t seed);

}  // namespace ppbench::cuda
