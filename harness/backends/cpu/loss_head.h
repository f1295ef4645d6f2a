// The last layer of a chain: a (norm +) linear head and softmax cross-
// entropy. F returns the micro-batch's loss; I seeds the backward with the
// loss scale, so that a step of N micro-batches differentiates their mean.
#pragma once

#include "workloads/cpu/cross_entropy.h"
#include "workloads/cpu/pipeline_layer.h"

namespace ppbench::cpu {

template <typename T>
class LossHead final : public PipelineLayer<T> {
 public:
  // `head` maps the boundary tensor to logits; `reads_data` when the head is
  // also the first layer (a one-layer MLP).
  LossHead(LayerPtr<T> head, bool reads_data) : head_(std::move(head)), reads_data_(reads_data) {}
  std::string name() const override { return "loss(" + head_->name() + ")"; }

  Tensors<T> forward(Tensors<T> in, Saved<T>& saved, const MicroBatchData<T>& data) override {
    saved.sub.resize(2);
    const Tensor<T>& x = reads_data_ ? data.inputs->front() : in.front();
    const Tensor<T> logits = head_->forward(x, saved.sub[0]);
    Tensors<T> out;
    out.emplace_back(std::vector<std::int64_t>{1},
                     loss_.forward(logits, *data.targets, saved.sub[1]));
    return out;
  }
  Tensors<T> backward_input(Tensors<T>, Saved<T>& saved, const MicroBatchData<T>& data) override {
    const Tensor<T> dlogits = loss_.backward_input(saved.sub[1], data.loss_scale);
    Tensors<T> out;
    out.push_back(head_->backward_input(dlogits, saved.sub[0]));
    return out;
  }
  void backward_weight(Saved<T>& saved) override {
    head_->backward_weight(saved.sub[0]);
    saved.clear();
  }
  std::vector<Param<T>*> params() override { return head_->params(); }

 private:
  LayerPtr<T> head_;
  SoftmaxCrossEntropy<T> loss_;
  bool reads_data_;
};

}  // namespace ppbench::cpu
