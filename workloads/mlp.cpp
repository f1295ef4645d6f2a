#include "workloads/mlp.h"

#include <string>

#include "workloads/shape_check.h"

namespace ppbench {

void MlpConfig::validate() const {
  require_positive("--layers", layers);
  require_positive("--width", width);
  if (input_dim != 0) require_positive("--input-dim", input_dim);
  require_positive("--classes", classes);
}

namespace {

// One linear layer of `in` -> `out` features on a micro-batch of b samples.
//   F: Y = X A^T + bias          2 b in out
//   I: dX = dY A                 2 b in out  (none for the first layer: its input is data)
//   W: dA = dY^T X, dbias        2 b in out
//
// Memory, e = dtype bytes. What ppbench's kernels keep (Linear, GeLU, SoftmaxCrossEntropy):
//   block  M_B = e b (in + out)          Linear's input X, GeLU's input (the linear output)
//          M_W = e b (in + out)          X and dY for dA = dY^T X; GeLU frees its input in I
//   head   M_B = e b (in + out + 1)      X, the softmax probabilities, the targets (one value of
//                                        the dtype per sample)
//          M_W = e b (in + out)          X and dlogits; I turns the probabilities into dlogits
// The paper's accounting (inputs of the product and the element-wise part's input, M_W = X and
// dY) gives e b (in + out) for both kinds and both figures.
LayerSpec linear_layer(std::string name, LayerKind kind, Size in, Size out, Size b, int e,
                       bool first) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  l.params = in * out + out;
  const double mm = 2.0 * static_cast<double>(b) * static_cast<double>(in * out);
  l.flops = {mm, first ? 0.0 : mm, mm};
  const bool loss = kind == LayerKind::kClassifierLoss;
  l.activation.b = e * b * (in + out + (loss ? 1 : 0));
  l.activation.w = e * b * (in + out);
  l.paper_activation = {e * b * (in + out), e * b * (in + out)};
  l.attrs = {{"in", in}, {"out", out}};
  if (kind == LayerKind::kMlpBlock) l.boundary_out.push_back({"hidden", {b, out}, e * b * out});
  return l;
}

}  // namespace

WorkloadSpec build_mlp(const MlpConfig& cfg, int64_t microbatch_size, DType dtype) {
  cfg.validate();
  require_positive("--microbatch-size", microbatch_size);
  const Size b = microbatch_size;
  const int e = dtype_bytes(dtype);
  const Size in0 = cfg.input_dim ? cfg.input_dim : cfg.width;

  WorkloadSpec spec;
  spec.workload = "mlp";
  spec.config = {{"layers", cfg.layers},
                 {"width", cfg.width},
                 {"input_dim", in0.value()},
                 {"classes", cfg.classes}};
  spec.microbatch_size = b;
  spec.dtype = dtype;
  spec.input = {"features", {b, in0}, e * b * in0};
  spec.labels = {{"labels", {b}, 4 * b}};  // int32 class indices

  Size in = in0;
  for (int64_t i = 0; i + 1 < cfg.layers; ++i) {
    spec.layers.push_back(linear_layer("block" + std::to_string(i), LayerKind::kMlpBlock, in,
                                       cfg.width, b, e, i == 0));
    in = cfg.width;
  }
  spec.layers.push_back(
      linear_layer("head", LayerKind::kClassifierLoss, in, cfg.classes, b, e, cfg.layers == 1));
  return spec;
}

}  // namespace ppbench
