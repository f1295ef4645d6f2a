#include "harness/backends/cpu/model_builder.h"

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "harness/backends/cpu/loss_head.h"
#include "workloads/cpu/amoebanet_cells.h"
#include "workloads/cpu/blocks.h"
#include "workloads/cpu/embedding.h"
#include "workloads/cpu/layernorm.h"
#include "workloads/cpu/linear.h"
#include "workloads/cpu/rmsnorm.h"
#include "workloads/index_range.h"
#include "workloads/synthetic_data.h"

namespace ppbench::cpu {

template <typename T>
std::int64_t largest_index_count() {
  // Ids run 0 .. count - 1 and every integer up to 2^digits is exact in T, so count - 1 may
  // reach 2^digits; past 2^31 the int32 targets and the data's uint32 draw bound it instead.
  constexpr std::int64_t exact = (std::int64_t{1} << std::numeric_limits<T>::digits) + 1;
  return std::min(exact, kMaxInt32IndexCount);
}

template <typename T>
void require_exact_indices(const WorkloadSpec& spec) {
  const IndexRange r = index_range(spec);
  const std::int64_t most = largest_index_count<T>();
  if (r.count <= most) return;
  // Where the dtype holds every id an int32 can, the int32 targets are the bound.
  if (most == kMaxInt32IndexCount) return require_int32_indices(spec, "CPU");
  constexpr int digits = std::numeric_limits<T>::digits;
  const std::string type(dtype_name(std::is_same_v<T, float> ? DType::kF32 : DType::kF64));
  const bool f64_holds = r.count <= largest_index_count<double>();
  throw UsageError(index_range_refusal(
      r, "the CPU backend at --dtype " + type,
      "it stores " + r.what + " as " + type + " values, exact only up to " +
          std::to_string(std::int64_t{1} << digits) + " (2^" + std::to_string(digits) + ")",
      most, f64_holds ? "; use --dtype f64" : ""));
}

template <typename T>
PipelineLayerPtr<T> make_pipeline_layer(const WorkloadSpec& spec, std::size_t index,
                                        std::uint64_t seed) {
  // Before the layer allocates: the single-device reference and the tests build layers before
  // any data.
  require_exact_indices<T>(spec);
  const LayerSpec& l = spec.layers[index];
  const std::uint64_t s = derive_seed(seed, index);
  const bool first = index == 0;
  switch (l.kind) {
    case LayerKind::kMlpBlock:
      return std::make_unique<SingleTensorLayer<T>>(
          make_mlp_block<T>(l.attr("in"), l.attr("out"), s), first);
    case LayerKind::kClassifierLoss:
      return std::make_unique<LossHead<T>>(
          std::make_unique<Linear<T>>(l.attr("in"), l.attr("out"), true, s), first);
    case LayerKind::kEmbedding:
      return std::make_unique<SingleTensorLayer<T>>(
          std::make_unique<Embedding<T>>(l.attr("vocab"), l.attr("hidden"), s), true);
    case LayerKind::kLlamaLayer: {
      DecoderConfig c = DecoderConfig::llama(l.attr("hidden"), l.attr("heads"), l.attr("kv_heads"),
                                             l.attr("ffn"));
      c.rope_theta = static_cast<double>(l.attr("rope_theta"));
      return std::make_unique<SingleTensorLayer<T>>(make_decoder_layer<T>(c, s));
    }
    case LayerKind::kGptLayer:
      return std::make_unique<SingleTensorLayer<T>>(make_decoder_layer<T>(
          DecoderConfig::gpipe(l.attr("hidden"), l.attr("heads"), l.attr("ffn")), s));
    case LayerKind::kLmHead: {
      const std::int64_t h = l.attr("hidden");
      auto head = std::make_unique<Sequential<T>>("final norm + lm head");
      if (spec.layers[index - 1].kind == LayerKind::kGptLayer)
        head->add(std::make_unique<LayerNorm<T>>(h));
      else
        head->add(std::make_unique<RMSNorm<T>>(h));
      head->add(std::make_unique<Linear<T>>(h, l.attr("vocab"), false, s));
      return std::make_unique<LossHead<T>>(std::move(head), false);
    }
    case LayerKind::kAmoebaStem:
    case LayerKind::kAmoebaNormalCell:
    case LayerKind::kAmoebaReductionCell:
    case LayerKind::kPoolClassifier:
      return make_amoebanet_layer<T>(l, s);
  }
  throw std::logic_error("unknown layer kind");
}

template <typename T>
MicroBatch<T> make_microbatch(const WorkloadSpec& spec, std::uint64_t seed, int index) {
  // A run's first allocation is its data: refused here, before it, for ids T would round.
  require_exact_indices<T>(spec);
  MicroBatch<T> mb;
  const DataKeys keys = data_keys(seed, index);
  Tensor<T> x(spec.input.shape);
  const auto count = static_cast<std::uint32_t>(index_range(spec).count);  // at most 2^31
  if (spec.workload == "transformer") {
    const std::uint32_t vocab = count;
    const std::int64_t b = x.dim(0), seq = x.dim(1);
    for (std::int64_t i = 0; i < b; ++i)
      for (std::int64_t t = 0; t < seq; ++t) {
        x.data[static_cast<std::size_t>(i * seq + t)] =
            static_cast<T>(data_token(keys, i, t, seq, vocab));
        mb.targets.push_back(data_next_token(keys, i, t, seq, vocab));
      }
  } else {
    if (spec.workload == "amoebanet") {
      // The spec names images [b, 3, H, W]; the kernels run NHWC.
      const auto& sh = spec.input.shape;
      x = Tensor<T>({sh[0], sh[2], sh[3], sh[1]});
    }
    for (std::size_t k = 0; k < x.data.size(); ++k)
      x.data[k] = static_cast<T>(data_feature(keys, k));
    for (std::int64_t i = 0; i < spec.microbatch_size; ++i)
      mb.targets.push_back(data_label(keys, i, count));
  }
  mb.inputs.push_back(std::move(x));
  return mb;
}

template std::int64_t largest_index_count<float>();
template std::int64_t largest_index_count<double>();
template void require_exact_indices<float>(const WorkloadSpec&);
template void require_exact_indices<double>(const WorkloadSpec&);
template PipelineLayerPtr<float> make_pipeline_layer<float>(const WorkloadSpec&, std::size_t,
                                                            std::uint64_t);
template PipelineLayerPtr<double> make_pipeline_layer<double>(const WorkloadSpec&, std::size_t,
                                                              std::uint64_t);
template MicroBatch<float> make_microbatch<float>(const WorkloadSpec&, std::uint64_t, int);
template MicroBatch<double> make_microbatch<double>(const WorkloadSpec&, std::uint64_t, int);

}  // namespace ppbench::cpu
