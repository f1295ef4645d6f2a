// AmoebaNet-D's partitionable layers (docs/papers.md, workloads/amoebanet.h): the stem, the normal
// and reduction cells, and the pool-classifier loss head, as PipelineLayer<T>s.
//
// Boundary convention (torchgpipe's, and the spec's boundary_out):
//   stem        data.inputs[0] (image, NHWC)  ->  {out}
//   cell        {s1} or {s1, s2}              ->  {out, skip = s1}, or {out} for the last cell
//   classifier  {x}                           ->  {loss [1]}
// s1 is the previous cell's output, s2 the one before. The first cell reads the stem's single
// output as both s1 and s2; its backward then returns one gradient, the sum of the two. A cell
// passes its own raw s1 on as `skip`, so the next cell finds {its s1, its s2} in that order; the
// last cell (the classifier follows) passes only {out}. In backward_input the gradient of `skip`
// adds into s1's.
//
// Tensors are NHWC ([batch, height, width, channels]); the spec writes boundary shapes as
// [batch, channels, height, width], with the same element counts.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/cpu/amoebanet_ops.h"
#include "workloads/cpu/pipeline_layer.h"
#include "workloads/layer_configs.h"
#include "workloads/layer_spec.h"

namespace ppbench::cpu {

// ReLU, 3x3 stride-2 conv (pad 1, no bias) from 3 to `channels`, BatchNorm. Its backward_input
// returns the image gradient (Conv2d computes it anyway; the executor may drop it).
template <typename T>
class AmoebaStem final : public PipelineLayer<T> {
 public:
  AmoebaStem(std::int64_t in_channels, std::int64_t channels, std::uint64_t seed);
  std::string name() const override { return "amoeba_stem"; }
  Tensors<T> forward(Tensors<T> in, Saved<T>& saved, const MicroBatchData<T>& data) override;
  Tensors<T> backward_input(Tensors<T> grad_out, Saved<T>& saved,
                            const MicroBatchData<T>& data) override;
  void backward_weight(Saved<T>& saved) override { body_->backward_weight(saved); }
  std::vector<Param<T>*> params() override { return body_->params(); }

 private:
  LayerPtr<T> body_;
};

using ::ppbench::AmoebaCellConfig;

// One cell: preprocess s1 (ReLU-1x1 conv-BN to c) and s2 (factorized reduce after a reduction
// cell, else ReLU-1x1 conv-BN if its channels are not c, else identity) into states 0 and 1;
// five pairs of ops each summed into a new state; out = concat of the genotype's states.
// Saved.sub = {preprocess s1, preprocess s2, op 0 .. op 9}; Saved.in_shape = {number of boundary
// tensors F read} (1: s1 stood for s2 too).
template <typename T>
class AmoebaCell final : public PipelineLayer<T> {
 public:
  AmoebaCell(const AmoebaCellConfig& config, std::uint64_t seed);
  std::string name() const override {
    return config_.reduction ? "amoeba_reduction_cell" : "amoeba_normal_cell";
  }
  Tensors<T> forward(Tensors<T> in, Saved<T>& saved, const MicroBatchData<T>& data) override;
  Tensors<T> backward_input(Tensors<T> grad_out, Saved<T>& saved,
                            const MicroBatchData<T>& data) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override;

  std::int64_t out_channels() const;

 private:
  AmoebaCellConfig config_;
  LayerPtr<T> pre1_, pre2_;
  std::vector<LayerPtr<T>> ops_;
  std::vector<int> inputs_;  // the state each op reads
  std::vector<int> concat_;  // the states the output concatenates
};

// Global average pool, linear (with bias) to `classes`, softmax cross-entropy against
// data.targets. F returns {loss} (the micro-batch mean, unscaled); I seeds with
// data.loss_scale. Saved.sub = {pool, linear, cross-entropy}.
template <typename T>
class AmoebaPoolClassifier final : public PipelineLayer<T> {
 public:
  AmoebaPoolClassifier(std::int64_t in_channels, std::int64_t classes, std::uint64_t seed);
  std::string name() const override { return "amoeba_pool_classifier"; }
  Tensors<T> forward(Tensors<T> in, Saved<T>& saved, const MicroBatchData<T>& data) override;
  Tensors<T> backward_input(Tensors<T> grad_out, Saved<T>& saved,
                            const MicroBatchData<T>& data) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override;

 private:
  LayerPtr<T> pool_, linear_;
};

// The layer a spec entry of build_amoebanet describes (kAmoebaStem, kAmoebaNormalCell,
// kAmoebaReductionCell, kPoolClassifier), from its attrs. A cell emits `skip` when the spec
// lists two boundary tensors. Throws std::invalid_argument for other kinds or missing attrs.
template <typename T>
PipelineLayerPtr<T> make_amoebanet_layer(const ppbench::LayerSpec& spec, std::uint64_t seed);

}  // namespace ppbench::cpu
