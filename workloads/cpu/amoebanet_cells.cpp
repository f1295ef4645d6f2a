#include "workloads/cpu/amoebanet_cells.h"

#include <string>
#include <utility>

#include "workloads/amoebanet_genotype.h"
#include "workloads/cpu/concat.h"
#include "workloads/cpu/cross_entropy.h"
#include "workloads/cpu/eigen_util.h"
#include "workloads/cpu/linear.h"
#include "workloads/cpu/pool.h"

namespace ppbench::cpu {

namespace {

enum CellSub { kPre1, kPre2, kFirstOp };
enum ClassifierSub { kPool, kLinear, kLoss, kClassifierSubs };

// Gradients of a state used by several ops add up.
template <typename T>
void accumulate(Tensor<T>& into, Tensor<T> g) {
  if (into.data.empty())
    into = std::move(g);
  else
    add_into(into, g);
}

}  // namespace

// ---- stem ----

template <typename T>
AmoebaStem<T>::AmoebaStem(std::int64_t in_channels, std::int64_t channels, std::uint64_t seed)
    : body_(make_relu_conv_bn<T>(in_channels, channels, 3, 3, 2, seed)) {}

template <typename T>
Tensors<T> AmoebaStem<T>::forward(Tensors<T>, Saved<T>& saved, const MicroBatchData<T>& data) {
  check(data.inputs != nullptr && !data.inputs->empty(), "amoeba stem: no input image");
  Tensors<T> out;
  out.push_back(body_->forward(data.inputs->front(), saved));
  return out;
}

template <typename T>
Tensors<T> AmoebaStem<T>::backward_input(Tensors<T> grad_out, Saved<T>& saved,
                                         const MicroBatchData<T>&) {
  check(grad_out.size() == 1, "amoeba stem: expects one output gradient");
  Tensors<T> dx;
  dx.push_back(body_->backward_input(grad_out.front(), saved));
  return dx;
}

// ---- cell ----

template <typename T>
AmoebaCell<T>::AmoebaCell(const AmoebaCellConfig& config, std::uint64_t seed) : config_(config) {
  const std::int64_t c = config.channels;
  check(c > 0 && config.in_channels > 0 && config.skip_channels > 0,
        "amoeba cell: channel counts must be positive");
  pre1_ = make_relu_conv_bn<T>(config.in_channels, c, 1, 1, 1, derive_seed(seed, 0));
  if (config.reduction_prev)
    pre2_ = std::make_unique<FactorizedReduce<T>>(config.skip_channels, c, derive_seed(seed, 1));
  else if (config.skip_channels != c)
    pre2_ = make_relu_conv_bn<T>(config.skip_channels, c, 1, 1, 1, derive_seed(seed, 1));
  else
    pre2_ = std::make_unique<Identity<T>>();

  const auto concat = amoeba_cell_concat(config.reduction);
  concat_.assign(concat.begin(), concat.end());
  for (const auto& [input, op] : amoeba_cell_ops(config.reduction)) {
    const std::int64_t stride = config.reduction && input < 2 ? 2 : 1;
    inputs_.push_back(input);
    ops_.push_back(make_amoeba_op<T>(op, c, stride, derive_seed(seed, 2 + ops_.size())));
  }
}

template <typename T>
std::int64_t AmoebaCell<T>::out_channels() const {
  return config_.channels * static_cast<std::int64_t>(concat_.size());
}

template <typename T>
Tensors<T> AmoebaCell<T>::forward(Tensors<T> in, Saved<T>& saved, const MicroBatchData<T>&) {
  check(in.size() == 1 || in.size() == 2, "amoeba cell: expects {s1} or {s1, s2}");
  const Tensor<T>& s1 = in[0];
  const Tensor<T>& s2 = in.back();
  check(s1.shape.size() == 4 && s1.dim(3) == config_.in_channels,
        "amoeba cell: s1 must be NHWC with " + std::to_string(config_.in_channels) + " channels");
  check(s2.shape.size() == 4 && s2.dim(3) == config_.skip_channels,
        "amoeba cell: s2 must be NHWC with " + std::to_string(config_.skip_channels) + " channels");
  saved.clear();
  saved.in_shape = {static_cast<std::int64_t>(in.size())};
  saved.sub.resize(kFirstOp + ops_.size());

  std::vector<Tensor<T>> states;
  states.reserve(2 + ops_.size() / 2);
  states.push_back(pre1_->forward(s1, saved.sub[kPre1]));
  states.push_back(pre2_->forward(s2, saved.sub[kPre2]));
  check(states[0].shape == states[1].shape,
        "amoeba cell: s1 and s2 do not meet at one size (is reduction_prev right?)");
  for (std::size_t j = 0; j < ops_.size(); j += 2) {
    Tensor<T> a = ops_[j]->forward(states[inputs_[j]], saved.sub[kFirstOp + j]);
    const Tensor<T> b = ops_[j + 1]->forward(states[inputs_[j + 1]], saved.sub[kFirstOp + j + 1]);
    add_into(a, b);
    states.push_back(std::move(a));
  }
  std::vector<const Tensor<T>*> picked;
  for (int s : concat_) picked.push_back(&states[s]);

  Tensors<T> out;
  out.push_back(concat_channels(picked));
  if (config_.emits_skip) out.push_back(std::move(in[0]));
  return out;
}

template <typename T>
Tensors<T> AmoebaCell<T>::backward_input(Tensors<T> grad_out, Saved<T>& saved,
                                         const MicroBatchData<T>&) {
  check(grad_out.size() == (config_.emits_skip ? 2u : 1u),
        "amoeba cell: expects gradients of {out, skip}, or {out} for the last cell");
  check(saved.sub.size() == kFirstOp + ops_.size(), "amoeba cell: backward without forward");
  std::vector<Tensor<T>> d(2 + ops_.size() / 2);
  std::vector<std::int64_t> widths(concat_.size(), config_.channels);
  std::vector<Tensor<T>> pieces = split_channels(grad_out[0], widths);
  for (std::size_t i = 0; i < concat_.size(); ++i) accumulate(d[concat_[i]], std::move(pieces[i]));
  // A state's gradient is complete once every later pair has run its backward.
  for (std::size_t j = ops_.size(); j-- > 0;) {
    const Tensor<T>& g = d[2 + j / 2];
    check(!g.data.empty(), "amoeba cell: a state is neither concatenated nor read");
    accumulate(d[inputs_[j]], ops_[j]->backward_input(g, saved.sub[kFirstOp + j]));
  }
  Tensor<T> ds1 = pre1_->backward_input(d[0], saved.sub[kPre1]);
  Tensor<T> ds2 = pre2_->backward_input(d[1], saved.sub[kPre2]);
  if (config_.emits_skip) add_into(ds1, grad_out[1]);

  Tensors<T> dx;
  if (saved.in_shape.at(0) == 1) {  // s1 stood for s2 too
    add_into(ds1, ds2);
    dx.push_back(std::move(ds1));
  } else {
    dx.push_back(std::move(ds1));
    dx.push_back(std::move(ds2));
  }
  return dx;
}

template <typename T>
void AmoebaCell<T>::backward_weight(Saved<T>& saved) {
  pre1_->backward_weight(saved.sub[kPre1]);
  pre2_->backward_weight(saved.sub[kPre2]);
  for (std::size_t j = 0; j < ops_.size(); ++j) ops_[j]->backward_weight(saved.sub[kFirstOp + j]);
  saved.clear();
}

template <typename T>
std::vector<Param<T>*> AmoebaCell<T>::params() {
  std::vector<Param<T>*> all = pre1_->params();
  for (Param<T>* p : pre2_->params()) all.push_back(p);
  for (const LayerPtr<T>& op : ops_)
    for (Param<T>* p : op->params()) all.push_back(p);
  return all;
}

// ---- classifier ----

template <typename T>
AmoebaPoolClassifier<T>::AmoebaPoolClassifier(std::int64_t in_channels, std::int64_t classes,
                                              std::uint64_t seed)
    : pool_(std::make_unique<GlobalAvgPool<T>>()),
      linear_(std::make_unique<Linear<T>>(in_channels, classes, true, seed)) {}

template <typename T>
Tensors<T> AmoebaPoolClassifier<T>::forward(Tensors<T> in, Saved<T>& saved,
                                            const MicroBatchData<T>& data) {
  check(in.size() == 1, "amoeba classifier: expects {x} (the last cell passes no skip)");
  check(data.targets != nullptr, "amoeba classifier: no targets");
  saved.clear();
  saved.in_shape = in[0].shape;
  saved.sub.resize(kClassifierSubs);
  const Tensor<T> pooled = pool_->forward(in[0], saved.sub[kPool]);
  const Tensor<T> logits = linear_->forward(pooled, saved.sub[kLinear]);
  const T loss = SoftmaxCrossEntropy<T>().forward(logits, *data.targets, saved.sub[kLoss]);
  Tensors<T> out;
  out.push_back(Tensor<T>({1}, loss));
  return out;
}

template <typename T>
Tensors<T> AmoebaPoolClassifier<T>::backward_input(Tensors<T>, Saved<T>& saved,
                                                   const MicroBatchData<T>& data) {
  check(saved.sub.size() == kClassifierSubs, "amoeba classifier: backward without forward");
  const Tensor<T> dlogits =
      SoftmaxCrossEntropy<T>().backward_input(saved.sub[kLoss], data.loss_scale);
  const Tensor<T> dpooled = linear_->backward_input(dlogits, saved.sub[kLinear]);
  Tensors<T> dx;
  dx.push_back(pool_->backward_input(dpooled, saved.sub[kPool]));
  return dx;
}

template <typename T>
void AmoebaPoolClassifier<T>::backward_weight(Saved<T>& saved) {
  linear_->backward_weight(saved.sub[kLinear]);
  saved.clear();
}

template <typename T>
std::vector<Param<T>*> AmoebaPoolClassifier<T>::params() {
  return linear_->params();
}

// ---- builder ----

template <typename T>
PipelineLayerPtr<T> make_amoebanet_layer(const ppbench::LayerSpec& spec, std::uint64_t seed) {
  switch (spec.kind) {
    case ppbench::LayerKind::kAmoebaStem:
      return std::make_unique<AmoebaStem<T>>(spec.attr("in_channels"), spec.attr("out_channels"),
                                             seed);
    case ppbench::LayerKind::kAmoebaNormalCell:
    case ppbench::LayerKind::kAmoebaReductionCell: {
      AmoebaCellConfig c;
      c.reduction = spec.kind == ppbench::LayerKind::kAmoebaReductionCell;
      c.channels = spec.attr("channels");
      c.in_channels = spec.attr("in_channels");
      c.skip_channels = spec.attr("skip_channels");
      c.reduction_prev = spec.attr("reduction_prev") != 0;
      // Not an attr: the spec lists {out, skip} unless the classifier comes next.
      c.emits_skip = spec.boundary_out.size() == 2;
      check(spec.attr("reduction") == static_cast<std::int64_t>(c.reduction),
            "amoebanet layer '" + spec.name + "': kind and attr reduction disagree");
      auto cell = std::make_unique<AmoebaCell<T>>(c, seed);
      check(cell->out_channels() == spec.attr("out_channels"),
            "amoebanet layer '" + spec.name + "': out_channels disagrees with the genotype");
      return cell;
    }
    case ppbench::LayerKind::kPoolClassifier:
      return std::make_unique<AmoebaPoolClassifier<T>>(spec.attr("in_channels"),
                                                       spec.attr("classes"), seed);
    default:
      break;
  }
  check(false, "amoebanet layer '" + spec.name + "' is not an AmoebaNet layer kind");
  return nullptr;
}

template class AmoebaStem<float>;
template class AmoebaStem<double>;
template class AmoebaCell<float>;
template class AmoebaCell<double>;
template class AmoebaPoolClassifier<float>;
template class AmoebaPoolClassifier<double>;
template PipelineLayerPtr<float> make_amoebanet_layer<float>(const ppbench::LayerSpec&,
                                                             std::uint64_t);
template PipelineLayerPtr<double> make_amoebanet_layer<double>(const ppbench::LayerSpec&,
                                                               std::uint64_t);

}  // namespace ppbench::cpu
