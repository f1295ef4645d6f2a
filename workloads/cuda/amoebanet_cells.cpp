#include "workloads/cuda/amoebanet_cells.h"

#include <utility>

#include <cuda_runtime_api.h>

#include "workloads/amoebanet_genotype.h"
#include "workloads/counter_rng.h"
#include "workloads/cuda/blocks.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/concat.h"
#include "workloads/cuda/linear.h"
#include "workloads/cuda/pool.h"

namespace ppbench::cuda {

namespace {

enum CellSub { kPre1, kPre2, kFirstOp };

// a + b. Adds in place into whichever operand no other tensor holds (the sum is the same either
// way round); when both are held (two identity ops, or a state that is also its own input's
// gradient) the sum goes to a fresh buffer.
DTensor sum(Context& ctx, DTensor a, DTensor b) {
  if (a.shared() && !b.shared()) std::swap(a, b);
  return add_unshared(ctx, std::move(a), b, "amoeba cell sum");
}

// Gradients of a state read by several ops (or also concatenated) add up.
void accumulate(Context& ctx, DTensor& into, DTensor g) {
  if (into.empty()) {
    into = std::move(g);
    return;
  }
  into = sum(ctx, std::move(into), std::move(g));
}

}  // namespace

// ---- stem and classifier ----

LayerPtr make_amoeba_stem(DeviceArena& params, std::int64_t in_channels, std::int64_t channels,
                          DType dtype, std::uint64_t seed) {
  return make_relu_conv_bn(params, in_channels, channels, 3, 3, 2, dtype, seed);
}

LayerPtr make_amoeba_classifier_head(DeviceArena& params, std::int64_t in_channels,
                                     std::int64_t classes, DType dtype, std::uint64_t seed) {
  auto head = std::make_unique<Sequential>("amoeba_pool_classifier");
  head->add(std::make_unique<GlobalAvgPool>());
  head->add(std::make_unique<Linear>(params, in_channels, classes, true, dtype, seed));
  return head;
}

// ---- cell ----

AmoebaCell::AmoebaCell(DeviceArena& params, const AmoebaCellConfig& config, DType dtype,
                       std::uint64_t seed)
    : config_(config) {
  const std::int64_t c = config.channels;
  require(c > 0 && config.in_channels > 0 && config.skip_channels > 0,
          "amoeba cell: channel counts must be positive");
  pre1_ = make_relu_conv_bn(params, config.in_channels, c, 1, 1, 1, dtype, derive_seed(seed, 0));
  if (config.reduction_prev)
    pre2_ = std::make_unique<FactorizedReduce>(params, config.skip_channels, c, dtype,
                                               derive_seed(seed, 1));
  else if (config.skip_channels != c)
    pre2_ =
        make_relu_conv_bn(params, config.skip_channels, c, 1, 1, 1, dtype, derive_seed(seed, 1));
  else
    pre2_ = std::make_unique<Identity>();

  const auto concat = amoeba_cell_concat(config.reduction);
  concat_.assign(concat.begin(), concat.end());
  for (const auto& [input, op] : amoeba_cell_ops(config.reduction)) {
    // A reduction cell halves the size on the ops that read its inputs (states 0 and 1).
    const std::int64_t stride = config.reduction && input < 2 ? 2 : 1;
    inputs_.push_back(input);
    ops_.push_back(
        make_amoeba_op(params, op, c, stride, dtype, derive_seed(seed, 2 + ops_.size())));
  }
}

std::int64_t AmoebaCell::out_channels() const {
  return config_.channels * static_cast<std::int64_t>(concat_.size());
}

DTensors AmoebaCell::forward(Context& ctx, DTensors in, Saved& saved) {
  require(in.size() == 1 || in.size() == 2, "amoeba cell: expects {s1} or {s1, s2}");
  const DTensor& s1 = in[0];
  const DTensor& s2 = in.back();
  require(s1.shape().size() == 4 && s1.dim(3) == config_.in_channels,
          "amoeba cell: s1 must be NHWC with " + std::to_string(config_.in_channels) +
              " channels, got " + shape_text(s1.shape()));
  require(s2.shape().size() == 4 && s2.dim(3) == config_.skip_channels,
          "amoeba cell: s2 must be NHWC with " + std::to_string(config_.skip_channels) +
              " channels, got " + shape_text(s2.shape()));
  saved.clear();
  saved.in_shape = {static_cast<std::int64_t>(in.size())};
  saved.sub.resize(kFirstOp + ops_.size());

  std::vector<DTensor> states;
  states.reserve(2 + ops_.size() / 2);
  states.push_back(pre1_->forward(ctx, s1, saved.sub[kPre1]));
  states.push_back(pre2_->forward(ctx, s2, saved.sub[kPre2]));
  require(states[0].shape() == states[1].shape(),
          "amoeba cell: s1 and s2 do not meet at one size (is reduction_prev right?)");
  for (std::size_t j = 0; j < ops_.size(); j += 2) {
    DTensor a = ops_[j]->forward(ctx, states[static_cast<std::size_t>(inputs_[j])],
                                 saved.sub[kFirstOp + j]);
    DTensor b = ops_[j + 1]->forward(ctx, states[static_cast<std::size_t>(inputs_[j + 1])],
                                     saved.sub[kFirstOp + j + 1]);
    states.push_back(sum(ctx, std::move(a), std::move(b)));
  }
  std::vector<const DTensor*> picked;
  for (int s : concat_) picked.push_back(&states[static_cast<std::size_t>(s)]);

  DTensors out;
  out.push_back(concat_channels(ctx, picked));
  if (config_.emits_skip) out.push_back(std::move(in[0]));
  return out;
}

DTensors AmoebaCell::backward_input(Context& ctx, DTensors grad_out, Saved& saved) {
  require(grad_out.size() == (config_.emits_skip ? 2u : 1u),
          "amoeba cell: expects gradients of {out, skip}, or {out} for the last cell");
  require(saved.sub.size() == kFirstOp + ops_.size(), "amoeba cell: backward without forward");
  std::vector<DTensor> d(2 + ops_.size() / 2);
  const std::vector<std::int64_t> widths(concat_.size(), config_.channels);
  std::vector<DTensor> pieces = split_channels(ctx, grad_out[0], widths);
  for (std::size_t i = 0; i < concat_.size(); ++i)
    accumulate(ctx, d[static_cast<std::size_t>(concat_[i])], std::move(pieces[i]));
  // A state's gradient is complete once every later pair has run its backward.
  for (std::size_t j = ops_.size(); j-- > 0;) {
    const std::size_t k = 2 + j / 2;
    require(!d[k].empty(), "amoeba cell: a state is neither concatenated nor read");
    accumulate(ctx, d[static_cast<std::size_t>(inputs_[j])],
               ops_[j]->backward_input(ctx, d[k], saved.sub[kFirstOp + j]));
    // Both ops of the pair have read it (j + 1 went first): drop it, so a state gradient that an
    // identity op handed on is no longer held twice and can be added into in place.
    if (j % 2 == 0) d[k].release();
  }
  DTensor ds1 = pre1_->backward_input(ctx, d[0], saved.sub[kPre1]);
  d[0].release();
  DTensor ds2 = pre2_->backward_input(ctx, d[1], saved.sub[kPre2]);
  d[1].release();
  if (config_.emits_skip) accumulate(ctx, ds1, std::move(grad_out[1]));

  DTensors dx;
  if (saved.in_shape.at(0) == 1) {  // s1 stood for s2 too
    accumulate(ctx, ds1, std::move(ds2));
    dx.push_back(std::move(ds1));
  } else {
    dx.push_back(std::move(ds1));
    dx.push_back(std::move(ds2));
  }
  return dx;
}

void AmoebaCell::backward_weight(Context& ctx, Saved& saved) {
  pre1_->backward_weight(ctx, saved.sub[kPre1]);
  pre2_->backward_weight(ctx, saved.sub[kPre2]);
  for (std::size_t j = 0; j < ops_.size(); ++j)
    ops_[j]->backward_weight(ctx, saved.sub[kFirstOp + j]);
  saved.clear();
}

std::vector<Param*> AmoebaCell::params() {
  std::vector<Param*> all = pre1_->params();
  for (Param* p : pre2_->params()) all.push_back(p);
  for (const LayerPtr& op : ops_)
    for (Param* p : op->params()) all.push_back(p);
  return all;
}

void AmoebaCell::zero_grad(Context& ctx) {
  for (Param* p : params()) zero(p->grad, ctx.stream);
}

// ---- builder ----

std::unique_ptr<AmoebaCell> make_amoeba_cell(DeviceArena& params, const LayerSpec& spec,
                                             DType dtype, std::uint64_t seed) {
  require(spec.kind == LayerKind::kAmoebaNormalCell || spec.kind == LayerKind::kAmoebaReductionCell,
          "amoebanet layer '" + spec.name + "' is not an AmoebaNet cell");
  AmoebaCellConfig c;
  c.reduction = spec.kind == LayerKind::kAmoebaReductionCell;
  c.channels = spec.attr("channels");
  c.in_channels = spec.attr("in_channels");
  c.skip_channels = spec.attr("skip_channels");
  c.reduction_prev = spec.attr("reduction_prev") != 0;
  // Not an attr: the spec lists {out, skip} unless the classifier comes next.
  c.emits_skip = spec.boundary_out.size() == 2;
  require(spec.attr("reduction") == static_cast<std::int64_t>(c.reduction),
          "amoebanet layer '" + spec.name + "': kind and attr reduction disagree");
  auto cell = std::make_unique<AmoebaCell>(params, c, dtype, seed);
  require(cell->out_channels() == spec.attr("out_channels"),
          "amoebanet layer '" + spec.name + "': out_channels disagrees with the genotype");
  return cell;
}

}  // namespace ppbench::cuda
