// Composite layers. A block's F runs its sub-layers' F in order; its I runs their I in reverse;
// its W runs every sub-layer's W (order is irrelevant: they touch disjoint parameters). So a
// block's Saved after I is the sum of what its sub-layers keep for W.
#pragma once

#include <memory>
#include <vector>

#include "workloads/cpu/layer.h"
#include "workloads/layer_configs.h"

namespace ppbench::cpu {

template <typename T>
class Sequential final : public Layer<T> {
 public:
  explicit Sequential(std::string name = "sequential") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Sequential& add(LayerPtr<T> layer) {
    layers_.push_back(std::move(layer));
    return *this;
  }
  const std::vector<LayerPtr<T>>& layers() const { return layers_; }

  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override;

 private:
  std::string name_;
  std::vector<LayerPtr<T>> layers_;
};

// y = x + f(x). Keeps nothing itself: dx = dy + f.I(dy).
template <typename T>
class Residual final : public Layer<T> {
 public:
  explicit Residual(LayerPtr<T> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "residual(" + inner_->name() + ")"; }
  Layer<T>& inner() { return *inner_; }

  Tensor<T> forward(const Tensor<T>& x, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override { return inner_->params(); }

 private:
  LayerPtr<T> inner_;
};

// MLP block of the `mlp` workload: linear (with bias) then GeLU.
template <typename T>
LayerPtr<T> make_mlp_block(std::int64_t in, std::int64_t out, std::uint64_t seed);

using ::ppbench::DecoderConfig;

template <typename T>
LayerPtr<T> make_decoder_layer(const DecoderConfig& config, std::uint64_t seed);

}  // namespace ppbench::cpu
