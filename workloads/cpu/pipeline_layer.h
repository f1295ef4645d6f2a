// A partitionable layer as the pipeline executes it: the unit a stage is made
// of (one MLP block, one decoder layer, one AmoebaNet cell, the embedding, a
// loss head), with F, I and W as separate passes like every kernel.
//
// Several tensors may cross a stage boundary: an AmoebaNet cell reads the two
// previous cells' outputs and passes on its output and its own input, so a
// boundary is a list of tensors. The first layer reads its micro-batch's
// data; the loss head reads its targets and seeds the backward with the loss
// scale (1/N, so a step of N micro-batches is the mean over all of them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

template <typename T>
using Tensors = std::vector<Tensor<T>>;

// The bytes a message of tensors holds (found by argument-dependent lookup by the executor, which
// counts the bytes in flight between ranks).
template <typename T>
std::int64_t payload_bytes(const Tensors<T>& tensors) {
  std::int64_t b = 0;
  for (const Tensor<T>& t : tensors) b += t.bytes();
  return b;
}

// What a layer may need to know of the micro-batch it runs.
template <typename T>
struct MicroBatchData {
  const Tensors<T>* inputs = nullptr;                  // the first layer's input (data)
  const std::vector<std::int32_t>* targets = nullptr;  // the loss head's targets
  T loss_scale = T(1);
};

template <typename T>
class PipelineLayer {
 public:
  virtual ~PipelineLayer() = default;
  virtual std::string name() const = 0;
  // F. A loss head returns {loss} (shape [1]); the first layer ignores `in`
  // and reads `data.inputs`.
  virtual Tensors<T> forward(Tensors<T> in, Saved<T>& saved, const MicroBatchData<T>& data) = 0;
  // I. A loss head ignores `grad_out` and seeds with `data.loss_scale`.
  virtual Tensors<T> backward_input(Tensors<T> grad_out, Saved<T>& saved,
                                    const MicroBatchData<T>& data) = 0;
  // W: accumulates parameter gradients, then `saved` is empty.
  virtual void backward_weight(Saved<T>& saved) = 0;
  virtual std::vector<Param<T>*> params() = 0;
};

template <typename T>
using PipelineLayerPtr = std::unique_ptr<PipelineLayer<T>>;

// A one-tensor kernel layer (MLP block, decoder layer) in the pipeline.
template <typename T>
class SingleTensorLayer final : public PipelineLayer<T> {
 public:
  explicit SingleTensorLayer(LayerPtr<T> layer, bool reads_data = false)
      : layer_(std::move(layer)), reads_data_(reads_data) {}
  std::string name() const override { return layer_->name(); }
  Tensors<T> forward(Tensors<T> in, Saved<T>& saved, const MicroBatchData<T>& data) override {
    const Tensor<T>& x = reads_data_ ? data.inputs->front() : in.front();
    Tensors<T> out;
    out.push_back(layer_->forward(x, saved));
    return out;
  }
  Tensors<T> backward_input(Tensors<T> grad_out, Saved<T>& saved,
                            const MicroBatchData<T>&) override {
    Tensors<T> out;
    out.push_back(layer_->backward_input(grad_out.front(), saved));
    return out;
  }
  void backward_weight(Saved<T>& saved) override { layer_->backward_weight(saved); }
  std::vector<Param<T>*> params() override { return layer_->params(); }

 private:
  LayerPtr<T> layer_;
  bool reads_data_;
};

}  // namespace ppbench::cpu
