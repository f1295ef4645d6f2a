#include "harness/cuda/gpu_model.h"

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "workloads/counter_rng.h"
#include "workloads/cuda/blocks.h"
#include "workloads/cuda/embedding.h"
#include "workloads/cuda/init_fill.h"
#include "workloads/cuda/layernorm.h"
#include "workloads/cuda/linear.h"
#include "workloads/cuda/rmsnorm.h"
#include "workloads/index_range.h"

namespace ppbench::cuda {

namespace {

int total_microbatches(const Placement& p) {
  int n = 0;
  for (int m : p.chain_microbatches) n += m;
  return n;
}

// The spec writes images [b, c, h, w]; the AmoebaNet kernels hold them NHWC.
std::vector<cuda::Shape> nhwc_shapes(const std::vector<TensorSpec>& boundary) {
  std::vector<cuda::Shape> out;
  for (const TensorSpec& t : boundary) {
    if (t.shape.size() != 4)
      throw std::logic_error("boundary tensor '" + t.name + "' is not an image");
    out.push_back({t.shape[0], t.shape[2], t.shape[3], t.shape[1]});
  }
  return out;
}

}  // namespace

void require_gpu_workload(const WorkloadSpec& spec) {
  if (spec.workload != "mlp" && spec.workload != "transformer" && spec.workload != "amoebanet")
    throw UsageError("--backend cuda runs --workload mlp, transformer or amoebanet; " +
                     spec.workload +
                     " has no GPU kernels in workloads/cuda yet (use --backend cpu)");
  gpu_dtype(spec);
  require_int32_indices(spec, "CUDA");
}

cuda::DType gpu_dtype(const WorkloadSpec& spec) {
  switch (spec.dtype) {
    case ppbench::DType::kBF16:
      return cuda::DType::kBF16;
    case ppbench::DType::kF32:
      return cuda::DType::kF32;
    case ppbench::DType::kF64:
      break;
  }
  throw UsageError("--dtype f64 is for the CPU backend; the CUDA backend runs bf16 or f32");
}

std::vector<cuda::Shape> stage_output_shapes(const WorkloadSpec& spec, const PartitionPlan& plan,
                                             const Placement& p) {
  std::vector<cuda::Shape> out;
  for (int st = 0; st < p.stages(); ++st) {
    const StageSpec& part = plan.stages[static_cast<std::size_t>(p.part(st))];
    const LayerSpec& last =
        spec.layers[static_cast<std::size_t>(part.first_layer + part.num_layers - 1)];
    if (p.is_last(st) || last.boundary_out.empty()) {
      out.emplace_back();
    } else if (last.boundary_out.size() == 1) {
      out.push_back(last.boundary_out.front().shape);
    } else {  // packed into one flat tensor (gpu_model.h)
      std::int64_t n = 0;
      for (const TensorSpec& t : last.boundary_out) n += cuda::shape_numel(t.shape);
      out.push_back({n});
    }
  }
  return out;
}

std::size_t rank_static_bytes(const WorkloadSpec& spec, const PartitionPlan& plan,
                              const Placement& p, int rank) {
  const std::size_t elem = cuda::dtype_size(gpu_dtype(spec));
  std::size_t bytes = std::size_t{16} << 20;
  for (int st = 0; st < p.stages(); ++st) {
    if (p.stage_rank[st] != rank) continue;
    const StageSpec& part = plan.stages[static_cast<std::size_t>(p.part(st))];
    for (int l = part.first_layer; l < part.first_layer + part.num_layers; ++l) {
      // value + f32 gradient (spec params is the kernels' exact count, AmoebaNet's convolutions
      // and BatchNorm gain/shift included), and each tensor rounded up to the arena's 256-byte
      // alignment: 64 KiB covers 128 parameter tensors a layer; an AmoebaNet cell has at most 40.
      bytes +=
          static_cast<std::size_t>(spec.layers[static_cast<std::size_t>(l)].params) * (elem + 4);
      bytes += std::size_t{64} << 10;
    }
    const std::size_t n = static_cast<std::size_t>(p.microbatches_of(st));
    bytes += n * (static_cast<std::size_t>(cuda::shape_numel(spec.input.shape)) * 4 + 4096);
    bytes += n * (static_cast<std::size_t>(cuda::shape_numel(spec.input.shape)) * 4 + 4096);
  }
  return bytes;
}

GpuPipelineRank::GpuPipelineRank(const WorkloadSpec& spec, const PartitionPlan& plan,
                                 const Placement& p, int rank, std::uint64_t seed,
                                 cudaStream_t compute, std::size_t activation_arena_bytes,
                                 int first_microbatch, int loss_microbatches)
    : p_(p),
      rank_(rank),
      microbatches_(loss_microbatches > 0 ? loss_microbatches : total_microbatches(p)) {
  require_gpu_workload(spec);
  const cuda::DType dt = gpu_dtype(spec);
  const std::string who = "rank " + std::to_string(rank);
  params_ = std::make_unique<cuda::DeviceArena>(who + " parameters and data",
                                                rank_static_bytes(spec, plan, p, rank));
  acts_ = std::make_unique<cuda::DeviceArena>(who + " activations", activation_arena_bytes);
  ctx_ = std::make_unique<cuda::Context>(*acts_, compute);
  int base = 0;
  std::vector<int> chain_base;
  for (int m : p.chain_microbatches) chain_base.push_back(base), base += m;

  for (int st = 0; st < p.stages(); ++st) {
    if (p.stage_rank[st] != rank) continue;
    Stage stage;
    stage.id = st;
    stage.part = p.part(st);
    const StageSpec& part = plan.stages[static_cast<std::size_t>(stage.part)];
    stage.first_layer = part.first_layer;
    for (int l = part.first_layer; l < part.first_layer + part.num_layers; ++l) {
      const std::size_t index = static_cast<std::size_t>(l);
      const LayerSpec& ls = spec.layers[index];
      const std::uint64_t s = derive_seed(seed, index);
      StageLayer sl;
      sl.reads_data = index == 0;
      switch (ls.kind) {
        case LayerKind::kMlpBlock:
          sl.body = cuda::make_mlp_block(*params_, ls.attr("in"), ls.attr("out"), dt, s);
          break;
        case LayerKind::kClassifierLoss:
          sl.body =
              std::make_unique<cuda::Linear>(*params_, ls.attr("in"), ls.attr("out"), true, dt, s);
          sl.loss = true;
          break;
        case LayerKind::kEmbedding:
          sl.body = std::make_unique<cuda::Embedding>(*params_, ls.attr("vocab"), ls.attr("hidden"),
                                                      dt, s);
          sl.reads_data = true;
          break;
        case LayerKind::kLlamaLayer: {
          DecoderConfig c = DecoderConfig::llama(ls.attr("hidden"), ls.attr("heads"),
                                                 ls.attr("kv_heads"), ls.attr("ffn"));
          c.rope_theta = static_cast<double>(ls.attr("rope_theta"));
          sl.body = cuda::make_decoder_layer(*params_, c, dt, s);
          break;
        }
        case LayerKind::kGptLayer:
          sl.body = cuda::make_decoder_layer(
              *params_, DecoderConfig::gpipe(ls.attr("hidden"), ls.attr("heads"), ls.attr("ffn")),
              dt, s);
          break;
        case LayerKind::kAmoebaStem:
          sl.body = cuda::make_amoeba_stem(*params_, ls.attr("in_channels"),
                                           ls.attr("out_channels"), dt, s);
          sl.reads_data = true;
          break;
        case LayerKind::kAmoebaNormalCell:
        case LayerKind::kAmoebaReductionCell:
          sl.cell = cuda::make_amoeba_cell(*params_, ls, dt, s);
          break;
        case LayerKind::kPoolClassifier:
          sl.body = cuda::make_amoeba_classifier_head(*params_, ls.attr("in_channels"),
                                                      ls.attr("classes"), dt, s);
          sl.loss = true;
          break;
        case LayerKind::kLmHead: {
          const std::int64_t h = ls.attr("hidden");
          auto head = std::make_unique<cuda::Sequential>("final norm + lm head");
          if (spec.layers[index - 1].kind == LayerKind::kGptLayer)
            head->add(std::make_unique<cuda::LayerNorm>(*params_, h, dt));
          else
            head->add(std::make_unique<cuda::RMSNorm>(*params_, h, dt));
          head->add(std::make_unique<cuda::Linear>(*params_, h, ls.attr("vocab"), false, dt, s));
          sl.body = std::move(head);
          sl.loss = true;
          break;
        }
        default:
          throw UsageError("layer '" + ls.name + "' has no GPU kernel (use --backend cpu)");
      }
      stage.layers.push_back(std::move(sl));
    }
    if (spec.workload == "amoebanet") {
      const int last = part.first_layer + part.num_layers - 1;
      if (part.first_layer > 0)
        stage.in_shapes =
            nhwc_shapes(spec.layers[static_cast<std::size_t>(part.first_layer - 1)].boundary_out);
      stage.out_shapes = nhwc_shapes(spec.layers[static_cast<std::size_t>(last)].boundary_out);
    }
    const int n = p.microbatches_of(st);
    stage.saved.assign(static_cast<std::size_t>(n), std::vector<cuda::Saved>(stage.layers.size()));
    stage.logits_shape.assign(static_cast<std::size_t>(n),
                              std::vector<cuda::Shape>(stage.layers.size()));
    stage.bytes.assign(static_cast<std::size_t>(n), 0);
    // The data of the chain's micro-batches this stage reads: the CPU backend's synthetic data
    // (workloads/synthetic_data.h), drawn on the device.
    const bool first = p.is_first(st), last = p.is_last(st);
    for (int mb = 0; mb < n && (first || last); ++mb) {
      const int g = chain_base[static_cast<std::size_t>(p.stage_chain[st])] + mb;
      const DataKeys keys = data_keys(seed, first_microbatch + g);
      if (first && !inputs_.count(g)) inputs_.emplace(g, make_inputs(spec, keys, dt));
      if (last && !targets_.count(g)) targets_.emplace(g, make_targets(spec, keys));
    }
    stages_.push_back(std::move(stage));
  }
}

cuda::DTensor GpuPipelineRank::make_inputs(const WorkloadSpec& spec, const DataKeys& keys,
                                           cuda::DType dt) {
  cuda::Shape shape = spec.input.shape;
  if (spec.workload == "transformer") {
    cuda::DTensor ids(*params_, shape, cuda::DType::kI32, "input data");
    // At most 2^31 (require_gpu_workload): the draw's uint32 bound holds it.
    cuda::fill_tokens(ids, keys, static_cast<std::uint32_t>(index_range(spec).count));
    return ids;
  }
  if (spec.workload == "amoebanet") shape = {shape[0], shape[2], shape[3], shape[1]};  // NHWC
  cuda::DTensor x(*params_, shape, dt, "input data");
  cuda::fill_features(x, keys);
  return x;
}

cuda::DTensor GpuPipelineRank::make_targets(const WorkloadSpec& spec, const DataKeys& keys) {
  const auto count = static_cast<std::uint32_t>(index_range(spec).count);  // at most 2^31
  if (spec.workload == "transformer") {
    const std::int64_t b = spec.input.shape.at(0), seq = spec.input.shape.at(1);
    cuda::DTensor t(*params_, {b * seq}, cuda::DType::kI32, "targets");
    cuda::fill_next_tokens(t, keys, seq, count);
    return t;
  }
  cuda::DTensor t(*params_, {spec.microbatch_size}, cuda::DType::kI32, "targets");
  cuda::fill_labels(t, keys, count);
  return t;
}

GpuPipelineRank::Stage& GpuPipelineRank::find(int stage) {
  for (Stage& s : stages_)
    if (s.id == stage) return s;
  throw std::logic_error("stage " + std::to_string(stage) + " is not on this rank");
}

int GpuPipelineRank::global_mb(int stage, int mb) const {
  int base = 0;
  for (int c = 0; c < p_.stage_chain[stage]; ++c)
    base += p_.chain_microbatches[static_cast<std::size_t>(c)];
  return base + mb;
}

void GpuPipelineRank::account(Stage& s, int mb) {
  std::size_t b = 0;
  for (const cuda::Saved& sv : s.saved[static_cast<std::size_t>(mb)])
    b += static_cast<std::size_t>(sv.bytes());
  s.live = s.live - s.bytes[static_cast<std::size_t>(mb)] + b;
  s.bytes[static_cast<std::size_t>(mb)] = b;
}

std::vector<cuda::Param*> GpuPipelineRank::StageLayer::params() const {
  return cell ? cell->params() : body->params();
}

std::vector<cuda::DTensor> GpuPipelineRank::unpack(const cuda::DTensor& x,
                                                   const std::vector<cuda::Shape>& shapes) {
  if (x.empty()) return {};  // a chain's first stage reads its data, its last seeds from the loss
  if (shapes.empty()) return {x};
  if (shapes.size() == 1) return {x.reshaped(shapes.front())};
  std::int64_t total = 0;
  for (const cuda::Shape& sh : shapes) total += cuda::shape_numel(sh);
  if (x.numel() != total)
    throw std::logic_error("stage boundary: received " + std::to_string(x.numel()) +
                           " elements for " + std::to_string(shapes.size()) + " tensors of " +
                           std::to_string(total));
  // Copies rather than views (a DTensor is a whole arena block): the received buffer goes back to
  // the arena as soon as this returns, so the boundary is held once either way.
  std::vector<cuda::DTensor> out;
  std::size_t offset = 0;
  for (const cuda::Shape& sh : shapes) {
    cuda::DTensor t(*acts_, sh, x.dtype(), "unpacked boundary tensor");
    CUDA_CHECK(cudaMemcpyAsync(t.data(), static_cast<const char*>(x.data()) + offset,
                               static_cast<std::size_t>(t.bytes()), cudaMemcpyDeviceToDevice,
                               ctx_->stream));
    offset += static_cast<std::size_t>(t.bytes());
    out.push_back(std::move(t));
  }
  return out;
}

cuda::DTensor GpuPipelineRank::pack(std::vector<cuda::DTensor> xs) {
  if (xs.empty()) return {};
  if (xs.size() == 1) return std::move(xs.front());
  std::int64_t total = 0;
  for (const cuda::DTensor& x : xs) {
    if (x.dtype() != xs.front().dtype())
      throw std::logic_error("stage boundary: tensors of two dtypes");
    total += x.numel();
  }
  cuda::DTensor out(*acts_, {total}, xs.front().dtype(), "packed boundary tensors");
  std::size_t offset = 0;
  for (const cuda::DTensor& x : xs) {
    CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(out.data()) + offset, x.data(),
                               static_cast<std::size_t>(x.bytes()), cudaMemcpyDeviceToDevice,
                               ctx_->stream));
    offset += static_cast<std::size_t>(x.bytes());
  }
  return out;
}

namespace {

// The tensor of a one-tensor boundary (every layer but an AmoebaNet cell reads and returns one).
const cuda::DTensor& only(const std::vector<cuda::DTensor>& xs, const char* what) {
  if (xs.size() != 1)
    throw std::logic_error(std::string(what) + ": expected one tensor, got " +
                           std::to_string(xs.size()));
  return xs.front();
}

}  // namespace

cuda::DTensor GpuPipelineRank::forward(int stage, int mb, cuda::DTensor input) {
  Stage& s = find(stage);
  const int g = global_mb(stage, mb);
  auto& saved = s.saved[static_cast<std::size_t>(mb)];
  std::vector<cuda::DTensor> xs = unpack(input, s.in_shapes);
  input = {};
  for (std::size_t l = 0; l < s.layers.size(); ++l) {
    StageLayer& layer = s.layers[l];
    if (layer.reads_data) xs = {inputs_.at(g)};
    if (layer.cell) {
      xs = layer.cell->forward(*ctx_, std::move(xs), saved[l]);
      continue;
    }
    const cuda::DTensor x = only(xs, "layer input");
    if (!layer.loss) {
      xs = {layer.body->forward(*ctx_, x, saved[l])};
      continue;
    }
    saved[l].sub.resize(2);
    const cuda::DTensor logits = layer.body->forward(*ctx_, x, saved[l].sub[0]);
    s.logits_shape[static_cast<std::size_t>(mb)][l] = logits.shape();
    xs = {ce_.forward(*ctx_, logits.reshaped({logits.rows(), logits.cols()}), targets_.at(g),
                      saved[l].sub[1])};
  }
  if (p_.is_last(stage)) losses_[g] = only(xs, "loss");
  account(s, mb);
  return pack(std::move(xs));
}

cuda::DTensor GpuPipelineRank::backward(int stage, int mb, cuda::DTensor grad, bool split) {
  Stage& s = find(stage);
  auto& saved = s.saved[static_cast<std::size_t>(mb)];
  const float scale = 1.0f / static_cast<float>(microbatches_);
  std::vector<cuda::DTensor> gs = unpack(grad, s.out_shapes);
  grad = {};
  for (std::size_t l = s.layers.size(); l-- > 0;) {
    StageLayer& layer = s.layers[l];
    if (layer.cell) {
      gs = layer.cell->backward_input(*ctx_, std::move(gs), saved[l]);
      if (!split) layer.cell->backward_weight(*ctx_, saved[l]);
      continue;
    }
    cuda::Saved& body_saved = layer.loss ? saved[l].sub[0] : saved[l];
    const cuda::DTensor g = layer.loss
                                ? ce_.backward_input(*ctx_, saved[l].sub[1], scale)
                                      .reshaped(s.logits_shape[static_cast<std::size_t>(mb)][l])
                                : only(gs, "layer output gradient");
    gs = {layer.body->backward_input(*ctx_, g, body_saved)};
    if (!split) {
      layer.body->backward_weight(*ctx_, body_saved);
      saved[l].clear();
    }
  }
  account(s, mb);
  return pack(std::move(gs));
}

void GpuPipelineRank::backward_weight(int stage, int mb) {
  Stage& s = find(stage);
  auto& saved = s.saved[static_cast<std::size_t>(mb)];
  for (std::size_t l = 0; l < s.layers.size(); ++l) {
    StageLayer& layer = s.layers[l];
    if (layer.cell)
      layer.cell->backward_weight(*ctx_, saved[l]);
    else
      layer.body->backward_weight(*ctx_, layer.loss ? saved[l].sub[0] : saved[l]);
    saved[l].clear();
  }
  account(s, mb);
}

std::size_t GpuPipelineRank::saved_bytes(int stage) const {
  for (const Stage& s : stages_)
    if (s.id == stage) return s.live;
  return 0;
}

void GpuPipelineRank::zero_grad(bool keep_losses) {
  for (Stage& s : stages_)
    for (StageLayer& l : s.layers)
      for (cuda::Param* prm : l.params()) cuda::zero(prm->grad, ctx_->stream);
  if (!keep_losses) losses_.clear();
}

std::map<int, double> GpuPipelineRank::losses() const {
  std::map<int, double> out;
  for (const auto& [g, t] : losses_) out[g] = static_cast<double>(cuda::download(t).at(0));
  return out;
}

std::vector<StageParams<cuda::Param>> GpuPipelineRank::params_by_layer() {
  std::vector<StageParams<cuda::Param>> out;
  for (Stage& s : stages_) {
    StageParams<cuda::Param> sp;
    sp.rank = rank_;
    sp.part = s.part;
    for (std::size_t l = 0; l < s.layers.size(); ++l)
      sp.layers.emplace_back(s.first_layer + static_cast<int>(l), s.layers[l].params());
    out.push_back(std::move(sp));
  }
  return out;
}

}  // namespace ppbench::cuda
