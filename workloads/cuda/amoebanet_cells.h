// AmoebaNet-D's partitionable layers on the GPU, as workloads/cpu/amoebanet_cells.h, with the
// CPU's seeds so both backends hold the same parameters:
//   stem        ReLU, 3x3 stride-2 conv (3 -> channels, no bias), BatchNorm: a one-tensor Layer
//   cell        {s1} or {s1, s2} -> {out, skip = s1}, or {out} for the last cell: AmoebaCell
//   classifier  global average pool, linear with bias: a one-tensor Layer giving the logits; the
//               caller adds the softmax cross-entropy (cuda::SoftmaxCrossEntropy), as the GPU
//               model does for every loss layer (harness/cuda/gpu_model.h)
// The boundary convention is the CPU's (see there): the first cell reads the stem's output as
// both s1 and s2 and returns one gradient, their sum; `skip` is s1 itself (the same buffer) and
// its gradient adds into s1's. Tensors are NHWC.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/cuda/amoebanet_ops.h"
#include "workloads/cuda/layer.h"
#include "workloads/layer_configs.h"
#include "workloads/layer_spec.h"

namespace ppbench::cuda {

using DTensors = std::vector<DTensor>;

// The body of cpu::AmoebaStem: make_relu_conv_bn(in_channels, channels, 3, 3, 2, seed).
LayerPtr make_amoeba_stem(DeviceArena& params, std::int64_t in_channels, std::int64_t channels,
                          DType dtype, std::uint64_t seed);

// The logits part of cpu::AmoebaPoolClassifier: a Sequential {global average pool, linear
// in_channels -> classes with bias, seed}, whose params() are the CPU classifier's.
LayerPtr make_amoeba_classifier_head(DeviceArena& params, std::int64_t in_channels,
                                     std::int64_t classes, DType dtype, std::uint64_t seed);

// One cell, as cpu::AmoebaCell: preprocess s1 (ReLU-1x1 conv-BN to c) and s2 (factorized reduce
// after a reduction cell, ReLU-1x1 conv-BN if its channels differ from c, else identity) into
// states 0 and 1; five pairs of ops each summed into a new state; out = the channel concat of
// the genotype's states. Same F / I / W split and Saved layout as the CPU: Saved.sub = {preprocess
// s1, preprocess s2, op 0 .. op 9}, Saved.in_shape = {number of tensors F read}.
//
// Identity ops hand back their input (and, in I, their output gradient) as the same buffer, so
// the sums of a pair and of a state's gradients never write in place into a buffer that another
// tensor still holds (DTensor::shared()): they add into the other operand or a fresh buffer.
class AmoebaCell {
 public:
  AmoebaCell(DeviceArena& params, const AmoebaCellConfig& config, DType dtype, std::uint64_t seed);
  std::string name() const {
    return config_.reduction ? "amoeba_reduction_cell" : "amoeba_normal_cell";
  }
  const AmoebaCellConfig& config() const { return config_; }
  std::int64_t out_channels() const;

  DTensors forward(Context& ctx, DTensors in, Saved& saved);
  DTensors backward_input(Context& ctx, DTensors grad_out, Saved& saved);
  void backward_weight(Context& ctx, Saved& saved);
  std::vector<Param*> params();
  void zero_grad(Context& ctx);

 private:
  AmoebaCellConfig config_;
  LayerPtr pre1_, pre2_;
  std::vector<LayerPtr> ops_;
  std::vector<int> inputs_;  // the state each op reads
  std::vector<int> concat_;  // the states the output concatenates
};

// The cell a spec entry of build_amoebanet describes (kAmoebaNormalCell, kAmoebaReductionCell),
// read from its attrs as cpu::make_amoebanet_layer reads them: it emits `skip` when the spec
// lists two boundary tensors. Throws std::invalid_argument for other kinds, missing attrs, or
// attrs that disagree with the genotype.
std::unique_ptr<AmoebaCell> make_amoeba_cell(DeviceArena& params, const LayerSpec& spec,
                                             DType dtype, std::uint64_t seed);

}  // namespace ppbench::cuda
