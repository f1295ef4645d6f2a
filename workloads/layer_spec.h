// A workload as the pipeline sees it: an ordered list of partitionable layers, each with its
// parameters, the FLOPs of F, I (input gradient) and W (weight gradient), the activation bytes it
// keeps between F and its backward, and the tensors that cross to the next layer.
//
// Granularity: a layer is the smallest unit a stage boundary may fall between. One transformer
// decoder layer, one AmoebaNet cell (and the stem, the classifier), one MLP linear+GeLU block. The
// embedding and the loss head are layers of their own so the partitioner can weigh them.
//
// Every number is for one micro-batch of `microbatch_size` samples at `dtype`, so a spec is built
// for a given (b, dtype) and the cost and memory models read it directly.
//
// FLOPs convention (Zero Bubble, Megatron): only matrix products and convolutions count, 2 FLOPs
// per multiply-add. Element-wise work (norms, activations, softmax, pools, residual adds) is
// memory-bound and left out. The first layer has no input gradient to propagate to (its input is
// data), so its I counts no matrix products.
//
// Memory convention. activation.b (M_B) is what F keeps for the backward of this micro-batch;
// activation.w (M_W) is what is still held between I and W. Two models are kept side by side:
//   activation        what ppbench's kernels keep (workloads/cpu): exactly Saved.bytes() after F
//                     and after I of one micro-batch, element for element, at dtype bytes per
//                     element (index tensors such as token ids and targets are stored as values of
//                     the dtype too). The executor's arena measures these bytes, so this is the
//                     model whose prediction a CPU run's measured peak must equal.
//   paper_activation  Zero Bubble section 3 / Korthikanti et al.'s accounting, for comparison with
//                     the papers' figures: the inputs of every weighted product and the gradients
//                     of their outputs for M_W, dropout masks at one byte when the workload has
//                     dropout (sb(34h + 5as) and 32sbh for the GPT layer at 16 bits).
// Norm and BatchNorm scale/shift gradients are reductions that fall out of I, so they belong to I
// and W holds only the matrix-product weight gradients (the kernels keep the reduced dgamma/dbeta,
// a few vectors, until W adds them in).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ppbench {

enum class DType { kBF16, kF32, kF64 };

int dtype_bytes(DType d);
// The largest relative error of rounding a value to the type: 2^-p for p significand bits.
double unit_roundoff(DType d);
std::string_view dtype_name(DType d);
// "bf16", "f32", "f64"; anything else is a UsageError naming it.
DType parse_dtype(std::string_view text);

// The partitionable layer types the kernels implement (workloads/cpu, workloads/cuda).
enum class LayerKind {
  kMlpBlock,          // linear (with bias) + GeLU
  kClassifierLoss,    // linear (with bias) + softmax cross-entropy: the MLP's last layer
  kEmbedding,         // token embedding lookup
  kLlamaLayer,        // RMSNorm, causal GQA attention with rotary, RMSNorm, SwiGLU FFN
  kGptLayer,          // LayerNorm, causal MHA with biases (no rotary), LayerNorm, GeLU FFN
  kLmHead,            // final norm + LM head linear + cross-entropy
  kAmoebaStem,        // ReLU, 3x3 stride-2 conv, BatchNorm
  kAmoebaNormalCell,  // AmoebaNet-D normal cell, including its two input preprocessors
  kAmoebaReductionCell,
  kPoolClassifier,  // global average pool + linear + softmax cross-entropy
};

std::string_view layer_kind_name(LayerKind k);

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

struct Flops {
  double f = 0, i = 0, w = 0;
  double total() const { return f + i + w; }
  Flops& operator+=(const Flops& o) {
    f += o.f, i += o.i, w += o.w;
    return *this;
  }
};

struct ActivationBytes {
  int64_t b = 0;  // M_B: kept from F until the backward (I or B) runs
  int64_t w = 0;  // M_W: held from I until W
  ActivationBytes& operator+=(const ActivationBytes& o) {
    b += o.b, w += o.w;
    return *this;
  }
};

struct LayerSpec {
  std::string name;
  LayerKind kind = LayerKind::kMlpBlock;
  int64_t params = 0;
  Flops flops;
  ActivationBytes activation;        // what ppbench's kernels keep (the memory model's input)
  ActivationBytes paper_activation;  // Zero Bubble / Korthikanti's formula, for comparison
  // What the next layer needs from this one (AmoebaNet cells pass two tensors: their output and
  // their own input, the next cell's "previous previous" state). Empty for the loss layer.
  std::vector<TensorSpec> boundary_out;
  // Shapes the kernels need (channels, spatial size, in/out features, stride flags...).
  std::map<std::string, int64_t> attrs;

  int64_t boundary_bytes() const;
  // attrs[key]; std::invalid_argument naming the layer where the spec lacks it.
  int64_t attr(const std::string& key) const;
};

struct WorkloadSpec {
  std::string workload;   // "mlp", "amoebanet", "transformer"
  nlohmann::json config;  // the resolved shape options, as the CLI would print them
  int64_t microbatch_size = 1;
  DType dtype = DType::kF32;
  TensorSpec input;                // what the first layer reads from the data
  std::vector<TensorSpec> labels;  // what the loss layer reads from the data
  std::vector<LayerSpec> layers;

  int64_t params() const;
  Flops flops() const;
  ActivationBytes activation() const;
  ActivationBytes paper_activation() const;
};

}  // namespace ppbench
