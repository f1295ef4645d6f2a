#include "workloads/layer_spec.h"

#include <stdexcept>
#include <string>

#include "core/error.h"
#include "workloads/shape_check.h"

namespace ppbench {

int dtype_bytes(DType d) {
  switch (d) {
    case DType::kBF16:
      return 2;
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
  }
  return 4;
}

double unit_roundoff(DType d) {
  switch (d) {
    case DType::kBF16:
      return 0x1.0p-8;
    case DType::kF32:
      return 0x1.0p-24;
    case DType::kF64:
      return 0x1.0p-53;
  }
  return 0;
}

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::kBF16:
      return "bf16";
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
  }
  return "f32";
}

DType parse_dtype(std::string_view text) {
  if (text == "bf16") return DType::kBF16;
  if (text == "f32") return DType::kF32;
  if (text == "f64") return DType::kF64;
  throw UsageError("unknown --dtype " + quoted(text) + " (allowed: bf16, f32, f64)");
}

std::string_view layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::kMlpBlock:
      return "mlp_block";
    case LayerKind::kClassifierLoss:
      return "classifier_loss";
    case LayerKind::kEmbedding:
      return "embedding";
    case LayerKind::kLlamaLayer:
      return "llama_layer";
    case LayerKind::kGptLayer:
      return "gpt_layer";
    case LayerKind::kLmHead:
      return "lm_head";
    case LayerKind::kAmoebaStem:
      return "amoeba_stem";
    case LayerKind::kAmoebaNormalCell:
      return "amoeba_normal_cell";
    case LayerKind::kAmoebaReductionCell:
      return "amoeba_reduction_cell";
    case LayerKind::kPoolClassifier:
      return "pool_classifier";
  }
  return "unknown";
}

// Sums are checked (SizeOverflow): each layer's figures fit in 64 bits, their sum need not.
int64_t LayerSpec::boundary_bytes() const {
  Size sum = 0;
  for (const auto& t : boundary_out) sum += t.bytes;
  return sum;
}

int64_t LayerSpec::attr(const std::string& key) const {
  const auto it = attrs.find(key);
  if (it == attrs.end())
    throw std::invalid_argument("layer '" + name + "' has no attribute '" + key + "'");
  return it->second;
}

int64_t WorkloadSpec::params() const {
  Size sum = 0;
  for (const auto& l : layers) sum += l.params;
  return sum;
}

Flops WorkloadSpec::flops() const {
  Flops sum;
  for (const auto& l : layers) sum += l.flops;
  return sum;
}

ActivationBytes WorkloadSpec::activation() const {
  Size b = 0, w = 0;
  for (const auto& l : layers) b += l.activation.b, w += l.activation.w;
  return {b, w};
}

ActivationBytes WorkloadSpec::paper_activation() const {
  Size b = 0, w = 0;
  for (const auto& l : layers) b += l.paper_activation.b, w += l.paper_activation.w;
  return {b, w};
}

}  // namespace ppbench
