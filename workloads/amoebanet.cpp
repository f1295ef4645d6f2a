#include "workloads/amoebanet.h"

#include <string>
#include <utility>

#include "workloads/amoebanet_genotype.h"
#include "workloads/shape_check.h"

namespace ppbench {

void AmoebaNetConfig::validate() const {
  require_positive("--layers", layers);
  require_positive("--filters", filters);
  require_positive("--image-size", image_size);
  require_positive("--classes", classes);
  if (layers % 3 != 0)
    throw UsageError("--layers " + std::to_string(layers) +
                     " is not allowed for amoebanet: L normal cells come in three equal groups, so "
                     "it must be a multiple of 3 (e.g. 18)");
  if (filters % 8 != 0)
    throw UsageError("--filters " + std::to_string(filters) +
                     " is not allowed: the first reduction cell has c = D/2 channels and its "
                     "bottleneck convolutions c/4, so D must be a multiple of 8 (e.g. 256)");
  if (image_size % 32 != 0)
    throw UsageError("--image-size " + std::to_string(image_size) +
                     " is not allowed: the stem and four reduction cells halve it five times, so "
                     "it must be a multiple of 32 (e.g. 224)");
}

namespace {

using Op = AmoebaOp;  // the genotype's ops (workloads/amoebanet_genotype.h)

// Totals of one layer; F = I = W = `mm` for convolutions (input and weight gradients of a
// convolution are each as many multiply-adds as the convolution itself).
//
// Memory, in elements. `kept`/`w_held` are what ppbench's kernels keep (workloads/cpu: ReLU,
// Conv2d, BatchNorm, pools, FactorizedReduce), per sample, and `kept_fixed`/`w_fixed` the
// per-channel vectors that do not scale with the micro-batch (BatchNorm's statistics over the
// whole micro-batch, GPipe's semantics): M_B = e (b kept + kept_fixed), M_W = e (b w_held +
// w_fixed), exactly Saved.bytes() after F and after I. `paper_kept`/`paper_w` are the products'
// accounting of Zero Bubble / Korthikanti applied to convolutions (each conv's input and BN's
// input; M_W the conv inputs and output gradients), kept for comparison.
struct Cost {
  Size params = 0;
  double mm = 0;
  Size kept = 0, kept_fixed = 0;
  Size w_held = 0, w_fixed = 0;
  Size paper_kept = 0, paper_w = 0;

  // ReLU -> conv (kh x kw, no bias) -> BatchNorm; input cin x hin x win, output cout x hout x wout.
  // The kernels keep the ReLU output (its mask) and, separately, the conv's copy of that same
  // tensor (2 cin hin win), BN's normalised output (cout hout wout) and 1/std per channel (cout).
  // I leaves the conv input and output gradient, and BN's reduced dgamma, dbeta (2 cout).
  void relu_conv_bn(Size cin, Size cout, Size kh, Size kw, Size hin, Size win, Size hout,
                    Size wout) {
    params += cin * cout * kh * kw + 2 * cout;
    mm += 2.0 * static_cast<double>(cin * cout * kh * kw * hout * wout);
    kept += 2 * cin * hin * win + cout * hout * wout;
    kept_fixed += cout;
    w_held += cin * hin * win + cout * hout * wout;
    w_fixed += 2 * cout;
    paper_kept += cin * hin * win + cout * hout * wout;
    paper_w += cin * hin * win + cout * hout * wout;
  }
  // ReLU, two 1x1 stride-2 convs to cout/2 channels (the second on the input shifted by one
  // pixel), concatenated, BatchNorm: h -> ho = ceil(h/2). The kernel keeps the ReLU output
  // (cin h^2), each conv's picked quarter (cin ho^2 each), BN's rows and 1/std; after I each
  // conv's input and output gradient (cin ho^2 + cout/2 ho^2 each) and BN's dgamma, dbeta.
  void factorized_reduce(Size cin, Size cout, Size h) {
    const Size ho = (h + 1) / 2;
    params += 2 * cin * (cout / 2) + 2 * cout;
    mm += 2.0 * 2.0 * static_cast<double>(cin * (cout / 2) * ho * ho);
    kept += cin * h * h + 2 * cin * ho * ho + cout * ho * ho;
    kept_fixed += cout;
    w_held += 2 * cin * ho * ho + cout * ho * ho;
    w_fixed += 2 * cout;
    paper_kept += cin * h * h + cout * ho * ho;
    paper_w += cin * h * h + cout * ho * ho;
  }
  // An op of the genotype on c channels of h x h with the given stride.
  void op(Op o, Size c, Size h, int64_t stride) {
    const Size ho = h / stride, q = c / 4;
    switch (o) {
      case Op::kConv1x1:
        relu_conv_bn(c, c, 1, 1, h, h, ho, ho);
        break;
      case Op::kConv3x3:
        relu_conv_bn(c, q, 1, 1, h, h, h, h);
        relu_conv_bn(q, q, 3, 3, h, h, ho, ho);
        relu_conv_bn(q, c, 1, 1, ho, ho, ho, ho);
        break;
      case Op::kConv1x7_7x1:  // the 1x7 strides along columns, the 7x1 along rows
        relu_conv_bn(c, q, 1, 1, h, h, h, h);
        relu_conv_bn(q, q, 1, 7, h, h, h, ho);
        relu_conv_bn(q, q, 7, 1, h, ho, ho, ho);
        relu_conv_bn(q, c, 1, 1, ho, ho, ho, ho);
        break;
      case Op::kMaxPool3x3:
      case Op::kMaxPool2x2:
        // The backward routes dY to the argmax: the kernel keeps one index (a dtype value) per
        // output element; the paper-style figure counts the input.
        kept += c * ho * ho;
        paper_kept += c * h * h;
        break;
      case Op::kAvgPool3x3:
        break;  // the backward needs only shapes
      case Op::kNone:
        if (stride == 2) factorized_reduce(c, c, h);
        break;
    }
  }
};

TensorSpec state(const char* name, Size b, Size c, Size h, int e) {
  return {name, {b, c, h, h}, e * b * c * h * h};
}

LayerSpec to_layer(std::string name, LayerKind kind, const Cost& cost, Size b, int e, bool first) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  l.params = cost.params;
  const double mm = cost.mm * static_cast<double>(b);
  l.flops = {mm, first ? 0.0 : mm, mm};
  l.activation = {e * (b * cost.kept + cost.kept_fixed), e * (b * cost.w_held + cost.w_fixed)};
  l.paper_activation = {e * b * cost.paper_kept, e * b * cost.paper_w};
  return l;
}

// Running channel/spatial state between cells (torchgpipe's and TensorFlow's bookkeeping).
struct Chain {
  Size c;               // the current cell channel count
  Size c_prev, h_prev;  // previous output
  Size c_pp, h_pp;      // the one before
  bool reduction_prev = false;
};

LayerSpec make_cell(std::string name, bool reduction, Chain& ch, bool next_is_cell, Size b, int e) {
  if (reduction) ch.c *= 2;
  const Size c = ch.c, h = ch.h_prev, ho = reduction ? h / 2 : h.value();
  Cost cost;
  // Preprocess both inputs to c channels at h x h.
  cost.relu_conv_bn(ch.c_prev, c, 1, 1, h, h, h, h);
  if (ch.reduction_prev)
    cost.factorized_reduce(ch.c_pp, c, ch.h_pp);
  else if (ch.c_pp != c)
    cost.relu_conv_bn(ch.c_pp, c, 1, 1, ch.h_pp, ch.h_pp, ch.h_pp, ch.h_pp);

  for (const auto& [input, op] : amoeba_cell_ops(reduction)) {
    const bool strided = reduction && input < 2;
    cost.op(op, c, input < 2 ? h : ho, strided ? 2 : 1);
  }
  const Size c_out = c * amoeba_cell_concat(reduction).size();

  LayerSpec l = to_layer(std::move(name),
                         reduction ? LayerKind::kAmoebaReductionCell : LayerKind::kAmoebaNormalCell,
                         cost, b, e, false);
  l.attrs = {{"channels", c},
             {"in_channels", ch.c_prev},
             {"in_size", h},
             {"skip_channels", ch.c_pp},
             {"skip_size", ch.h_pp},
             {"out_channels", c_out},
             {"out_size", ho},
             {"reduction", reduction},
             {"reduction_prev", ch.reduction_prev}};
  l.boundary_out.push_back(state("out", b, c_out, ho, e));
  if (next_is_cell) l.boundary_out.push_back(state("skip", b, ch.c_prev, h, e));

  ch.c_pp = ch.c_prev, ch.h_pp = ch.h_prev;
  ch.c_prev = c_out, ch.h_prev = ho;
  ch.reduction_prev = reduction;
  return l;
}

}  // namespace

WorkloadSpec build_amoebanet(const AmoebaNetConfig& cfg, int64_t microbatch_size, DType dtype) {
  cfg.validate();
  require_positive("--microbatch-size", microbatch_size);
  const Size b = microbatch_size;
  const int e = dtype_bytes(dtype);
  const Size h0 = cfg.image_size, h1 = h0 / 2, c0 = cfg.filters / 4;
  // BatchNorm normalises each channel over the micro-batch and the pixels (GPipe's semantics);
  // the cells after the last reduction see (h0 / 32)^2 pixels, and one value has no variance.
  if (const Size last = h0 / 32; b * last * last < 2)
    throw UsageError("--image-size " + std::to_string(cfg.image_size) + " with --microbatch-size " +
                     std::to_string(b) +
                     " is not allowed: the last cells' images are 1x1, which leaves BatchNorm one "
                     "value per channel; use --image-size 64 or more, or --microbatch-size 2 or "
                     "more");

  WorkloadSpec spec;
  spec.workload = "amoebanet";
  spec.config = {{"layers", cfg.layers},
                 {"filters", cfg.filters},
                 {"image_size", cfg.image_size},
                 {"classes", cfg.classes}};
  spec.microbatch_size = b;
  spec.dtype = dtype;
  spec.input = state("image", b, 3, h0, e);
  spec.labels = {{"labels", {b}, 4 * b}};

  // Stem: ReLU, 3x3 stride-2 conv (padding 1) 3 -> D/4, BN. No input gradient (the image).
  Cost stem;
  stem.relu_conv_bn(3, c0, 3, 3, h0, h0, h1, h1);
  LayerSpec s = to_layer("stem", LayerKind::kAmoebaStem, stem, b, e, true);
  s.attrs = {{"in_channels", 3}, {"in_size", h0}, {"out_channels", c0}, {"out_size", h1}};
  s.boundary_out.push_back(state("out", b, c0, h1, e));  // the first cell reads it as both inputs
  spec.layers.push_back(std::move(s));

  Chain ch{c0, c0, h1, c0, h1, false};
  const int64_t group = cfg.layers / 3;
  spec.layers.push_back(make_cell("reduction0", true, ch, true, b, e));
  spec.layers.push_back(make_cell("reduction1", true, ch, true, b, e));
  for (int g = 0; g < 3; ++g) {
    for (int64_t i = 0; i < group; ++i) {
      const bool last = g == 2 && i + 1 == group;
      spec.layers.push_back(make_cell("normal" + std::to_string(g) + "." + std::to_string(i), false,
                                      ch, !last, b, e));
    }
    if (g < 2)
      spec.layers.push_back(make_cell("reduction" + std::to_string(g + 2), true, ch, true, b, e));
  }

  // Global average pool (GPipe's 7x7 pool at 224 pixels) + linear + softmax cross-entropy.
  LayerSpec cls;
  cls.name = "classifier";
  cls.kind = LayerKind::kPoolClassifier;
  cls.params = ch.c_prev * cfg.classes + cfg.classes;
  const double mm = 2.0 * static_cast<double>(b * ch.c_prev * cfg.classes);
  cls.flops = {mm, mm, mm};
  // The kernels keep the linear's input, the probabilities and the targets (the pool keeps only
  // shapes); I leaves the linear's input and dlogits.
  cls.activation = {e * b * (ch.c_prev + cfg.classes + 1), e * b * (ch.c_prev + cfg.classes)};
  cls.paper_activation = {e * b * (ch.c_prev + cfg.classes), e * b * (ch.c_prev + cfg.classes)};
  cls.attrs = {{"in_channels", ch.c_prev}, {"in_size", ch.h_prev}, {"classes", cfg.classes}};
  spec.layers.push_back(std::move(cls));
  return spec;
}

}  // namespace ppbench
