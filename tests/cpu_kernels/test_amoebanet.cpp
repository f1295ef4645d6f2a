// AmoebaNet-D's pipeline layers (stem, normal and reduction cells, pool classifier), built from
// the workload spec: gradients of every boundary tensor and parameter against central finite
// differences (float64), interleaved micro-batches, W accumulation, Saved emptied by W, the
// spec's parameter counts and boundary shapes, float32 against float64, and a whole tiny
// AmoebaNet run layer by layer against finite differences of its loss.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cpu_kernels/test_util.h"
#include "workloads/amoebanet.h"
#include "workloads/cpu/amoebanet_cells.h"

namespace ppbench::cpu {
namespace {

using testing::cast;
using testing::dot;
using testing::random_tensor;
using testing::rel_error;

constexpr std::int64_t kBatch = 4;
constexpr std::int64_t kClasses = 5;

// The smallest sizes the spec allows: D = 8 gives c = 2 at the stem, and 32 pixels survive the
// stem and four reductions (the last cells are 1x1). L = 6 so a normal cell follows a normal one.
WorkloadSpec tiny_spec(std::int64_t layers = 6, std::int64_t filters = 8, std::int64_t image = 32) {
  return build_amoebanet({layers, filters, image, kClasses}, kBatch, DType::kF64);
}

std::size_t index_of(const WorkloadSpec& spec, const std::string& name) {
  for (std::size_t i = 0; i < spec.layers.size(); ++i)
    if (spec.layers[i].name == name) return i;
  ADD_FAILURE() << "no layer " << name;
  return 0;
}

// The spec writes boundary tensors [batch, channels, height, width]; the kernels are NHWC.
std::vector<std::int64_t> nhwc(const TensorSpec& t) {
  const std::vector<std::int64_t>& s = t.shape;
  return {s[0], s[2], s[3], s[1]};
}

// What one layer reads for one micro-batch: its boundary and the micro-batch's data.
struct LayerInput {
  Tensors<double> boundary;  // empty for the stem
  Tensors<double> image;     // data.inputs
  std::vector<std::int32_t> targets;
  double loss_scale = 1;
  MicroBatchData<double> data() const { return {&image, &targets, loss_scale}; }
};

LayerInput random_input(const WorkloadSpec& spec, std::size_t layer, std::uint64_t seed) {
  LayerInput x;
  x.image.push_back(random_tensor(nhwc(spec.input), seed));
  Rng rng(seed + 1);
  for (std::int64_t i = 0; i < kBatch; ++i)
    x.targets.push_back(static_cast<std::int32_t>(rng.uniform() * kClasses));
  if (layer > 0) {
    const std::vector<TensorSpec>& prev = spec.layers[layer - 1].boundary_out;
    for (std::size_t k = 0; k < prev.size(); ++k)
      x.boundary.push_back(random_tensor(nhwc(prev[k]), seed + 10 + k));
  }
  return x;
}

void perturb(PipelineLayer<double>& layer, std::uint64_t seed) {
  Rng rng(seed);
  for (Param<double>* p : layer.params())
    for (double& v : p->value.data) v += rng.uniform(-0.5, 0.5);
}

template <typename T>
void zero_grad(PipelineLayer<T>& layer) {
  for (Param<T>* p : layer.params()) std::fill(p->grad.data.begin(), p->grad.data.end(), T(0));
}

template <typename T>
std::int64_t num_params(PipelineLayer<T>& layer) {
  std::int64_t n = 0;
  for (Param<T>* p : layer.params()) n += p->value.numel();
  return n;
}

bool is_loss_head(const LayerSpec& s) { return s.kind == LayerKind::kPoolClassifier; }

// The output gradients a test feeds back: random for a layer, ignored (seeded) for the head.
Tensors<double> output_grads(const Tensors<double>& out, bool loss_head, std::uint64_t seed) {
  Tensors<double> r;
  for (std::size_t k = 0; k < out.size(); ++k)
    r.push_back(loss_head ? Tensor<double>({1}, 1.0) : random_tensor(out[k].shape, seed + k));
  return r;
}

struct FdErrors {
  std::vector<double> inputs;  // one per input tensor (boundary, or the image for the stem)
  double params = 0;           // worst over all parameters
};

// F, I, W against central differences of L = sum_k <out_k, r_k> (the loss itself for the head,
// with loss scale 1). Checks every `every`-th input element and parameter entry.
FdErrors check_fd(PipelineLayer<double>& layer, LayerInput& x, bool loss_head, std::size_t every,
                  double eps = 1e-6) {
  const MicroBatchData<double> data = x.data();
  Saved<double> saved;
  const Tensors<double> out = layer.forward(x.boundary, saved, data);
  const Tensors<double> r = output_grads(out, loss_head, 777);
  zero_grad(layer);
  const Tensors<double> din = layer.backward_input(r, saved, data);
  layer.backward_weight(saved);
  EXPECT_EQ(saved.bytes(), 0);

  auto loss = [&] {
    Saved<double> s;
    const Tensors<double> o = layer.forward(x.boundary, s, data);
    double l = 0;
    for (std::size_t k = 0; k < o.size(); ++k) l += dot(o[k], r[k]);
    return l;
  };
  auto derivative = [&](double& v) {
    const double v0 = v;
    v = v0 + eps;
    const double lp = loss();
    v = v0 - eps;
    const double lm = loss();
    v = v0;
    return (lp - lm) / (2 * eps);
  };

  FdErrors e;
  Tensors<double>& wrt = x.boundary.empty() ? x.image : x.boundary;
  EXPECT_EQ(din.size(), wrt.size());
  for (std::size_t k = 0; k < std::min(din.size(), wrt.size()); ++k) {
    EXPECT_EQ(din[k].shape, wrt[k].shape);
    std::vector<double> analytic, numeric;
    for (std::size_t i = 0; i < wrt[k].data.size(); i += every) {
      analytic.push_back(din[k].data[i]);
      numeric.push_back(derivative(wrt[k].data[i]));
    }
    e.inputs.push_back(rel_error(analytic, numeric));
  }
  // Norm-wise over all the layer's parameters: a tensor whose gradient nearly vanishes (a
  // 1-channel bottleneck conv right before BatchNorm) would otherwise measure round-off.
  std::vector<double> analytic, numeric;
  for (Param<double>* p : layer.params()) {
    for (std::size_t i = 0; i < p->value.data.size(); i += every) {
      analytic.push_back(p->grad.data[i]);
      numeric.push_back(derivative(p->value.data[i]));
    }
  }
  e.params = rel_error(analytic, numeric);
  return e;
}

// ---- one layer at a time ----

struct LayerCase {
  std::string layer;  // name in tiny_spec()
  std::size_t every;  // finite differences on every n-th entry (1: all)
};
void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.layer; }

class AmoebaLayerTest : public ::testing::TestWithParam<LayerCase> {
 protected:
  AmoebaLayerTest() : spec_(tiny_spec()), index_(index_of(spec_, GetParam().layer)) {}
  const LayerSpec& layer_spec() const { return spec_.layers[index_]; }
  PipelineLayerPtr<double> make64() const { return make_amoebanet_layer<double>(layer_spec(), 5); }
  LayerInput input(std::uint64_t seed) const { return random_input(spec_, index_, seed); }

  WorkloadSpec spec_;
  std::size_t index_;
};

TEST_P(AmoebaLayerTest, GradientsMatchFiniteDifferences) {
  PipelineLayerPtr<double> layer = make64();
  perturb(*layer, 99);
  LayerInput x = input(1);
  const FdErrors e = check_fd(*layer, x, is_loss_head(layer_spec()), GetParam().every);
  std::printf("[ fd       ] %-11s", GetParam().layer.c_str());
  for (std::size_t k = 0; k < e.inputs.size(); ++k) std::printf(" d_in%zu %.2e", k, e.inputs[k]);
  std::printf("  dparams %.2e\n", e.params);
  for (double in : e.inputs) EXPECT_LE(in, 1e-6) << "input gradient (I)";
  EXPECT_LE(e.params, 1e-6) << "parameter gradients (W)";
}

// A pipeline runs F0 F1 I1 I0 W0 W1; that must be what the micro-batches give one at a time.
TEST_P(AmoebaLayerTest, InterleavedMicroBatchesEqualSequentialAndWAccumulates) {
  PipelineLayerPtr<double> layer = make64();
  perturb(*layer, 98);
  const bool head = is_loss_head(layer_spec());
  const LayerInput x0 = input(2), x1 = input(3);

  struct Run {
    Tensors<double> din;
    std::vector<std::vector<double>> grads;
  };
  auto sequential = [&](const std::vector<const LayerInput*>& xs) {
    zero_grad(*layer);
    Run run;
    for (const LayerInput* x : xs) {
      Saved<double> s;
      const Tensors<double> out = layer->forward(x->boundary, s, x->data());
      run.din = layer->backward_input(output_grads(out, head, 50), s, x->data());
      layer->backward_weight(s);
      EXPECT_EQ(s.bytes(), 0);
    }
    for (Param<double>* p : layer->params())
      run.grads.emplace_back(p->grad.data.begin(), p->grad.data.end());
    return run;
  };
  const Run r0 = sequential({&x0}), r1 = sequential({&x1}), r01 = sequential({&x0, &x1});

  zero_grad(*layer);
  Saved<double> s0, s1;
  const Tensors<double> y0 = layer->forward(x0.boundary, s0, x0.data());
  const Tensors<double> y1 = layer->forward(x1.boundary, s1, x1.data());
  const std::int64_t after_f = s1.bytes();
  const Tensors<double> dx1 = layer->backward_input(output_grads(y1, head, 50), s1, x1.data());
  const Tensors<double> dx0 = layer->backward_input(output_grads(y0, head, 50), s0, x0.data());
  const std::int64_t after_i = s1.bytes();
  layer->backward_weight(s0);
  EXPECT_EQ(s0.bytes(), 0);
  layer->backward_weight(s1);
  EXPECT_EQ(s1.bytes(), 0);
  EXPECT_GT(after_f, 0);
  EXPECT_LT(after_i, after_f);  // I frees what only it needed (ReLU masks, BN rows, arg-maxes)
  // The spec's memory model counts exactly what these kernels keep.
  EXPECT_EQ(after_f, layer_spec().activation.b);
  EXPECT_EQ(after_i, layer_spec().activation.w);
  std::printf(
      "[ saved    ] %-11s after F %7lld B (spec M_B %7lld)  after I %7lld B (spec M_W %7lld)\n",
      GetParam().layer.c_str(), static_cast<long long>(after_f),
      static_cast<long long>(layer_spec().activation.b), static_cast<long long>(after_i),
      static_cast<long long>(layer_spec().activation.w));

  for (std::size_t k = 0; k < dx0.size(); ++k) {
    EXPECT_EQ(dx0[k].data, r0.din[k].data);
    EXPECT_EQ(dx1[k].data, r1.din[k].data);
  }
  const std::vector<Param<double>*> ps = layer->params();
  for (std::size_t k = 0; k < ps.size(); ++k) {
    EXPECT_EQ(std::vector<double>(ps[k]->grad.data.begin(), ps[k]->grad.data.end()), r01.grads[k])
        << ps[k]->name;  // same order of sums: bitwise
    std::vector<double> sum(r0.grads[k].size());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = r0.grads[k][i] + r1.grads[k][i];
    // Another order of the same sums: rounding only (a wrong accumulation is off by O(1)); a
    // conv weight's gradient sums thousands of products, so allow 1e-11 of its largest entry.
    EXPECT_LE(rel_error(ps[k]->grad.data, sum), 1e-11) << ps[k]->name;
  }
}

TEST_P(AmoebaLayerTest, OutputShapesAndParameterCountAreTheSpecs) {
  PipelineLayerPtr<double> layer = make64();
  EXPECT_EQ(num_params(*layer), layer_spec().params);
  const LayerInput x = input(4);
  Saved<double> s;
  const Tensors<double> out = layer->forward(x.boundary, s, x.data());
  if (is_loss_head(layer_spec())) {
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, std::vector<std::int64_t>{1});
    return;
  }
  ASSERT_EQ(out.size(), layer_spec().boundary_out.size());
  for (std::size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k].shape, nhwc(layer_spec().boundary_out[k])) << k;
    EXPECT_EQ(out[k].bytes(), layer_spec().boundary_out[k].bytes) << k;
  }
}

TEST_P(AmoebaLayerTest, Float32IsCloseToFloat64) {
  PipelineLayerPtr<double> l64 = make64();
  PipelineLayerPtr<float> l32 = make_amoebanet_layer<float>(layer_spec(), 5);
  perturb(*l64, 97);
  const std::vector<Param<double>*> p64 = l64->params();
  const std::vector<Param<float>*> p32 = l32->params();
  ASSERT_EQ(p64.size(), p32.size());
  for (std::size_t k = 0; k < p64.size(); ++k) p32[k]->value = cast<float>(p64[k]->value);

  const LayerInput x = input(6);
  Tensors<float> boundary32, image32;
  for (const Tensor<double>& t : x.boundary) boundary32.push_back(cast<float>(t));
  for (const Tensor<double>& t : x.image) image32.push_back(cast<float>(t));
  const MicroBatchData<float> data32{&image32, &x.targets, 1.0f};
  const bool head = is_loss_head(layer_spec());

  Saved<double> s64;
  Saved<float> s32;
  const Tensors<double> y64 = l64->forward(x.boundary, s64, x.data());
  const Tensors<float> y32 = l32->forward(boundary32, s32, data32);
  const Tensors<double> r64 = output_grads(y64, head, 60);
  Tensors<float> r32;
  for (const Tensor<double>& t : r64) r32.push_back(cast<float>(t));
  zero_grad(*l64);
  zero_grad(*l32);
  const Tensors<double> d64 = l64->backward_input(r64, s64, x.data());
  const Tensors<float> d32 = l32->backward_input(r32, s32, data32);
  l64->backward_weight(s64);
  l32->backward_weight(s32);

  // BatchNorm over few values (4 per channel at the 1x1 cells) amplifies rounding: 1e-4.
  for (std::size_t k = 0; k < y64.size(); ++k) EXPECT_LE(rel_error(y32[k].data, y64[k].data), 1e-4);
  for (std::size_t k = 0; k < d64.size(); ++k) EXPECT_LE(rel_error(d32[k].data, d64[k].data), 1e-4);
  // Norm-wise over all the layer's parameters, as in check_fd: the near-vanishing gradient of a
  // 1-channel bottleneck conv before BatchNorm is all cancellation in float32.
  std::vector<double> g64;
  std::vector<float> g32;
  for (std::size_t k = 0; k < p64.size(); ++k) {
    g64.insert(g64.end(), p64[k]->grad.data.begin(), p64[k]->grad.data.end());
    g32.insert(g32.end(), p32[k]->grad.data.begin(), p32[k]->grad.data.end());
  }
  EXPECT_LE(rel_error(g32, g64), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Amoeba, AmoebaLayerTest,
    ::testing::Values(LayerCase{"stem", 3},
                      LayerCase{"reduction0", 1},  // reads the stem's output as s1 and s2
                      LayerCase{"reduction1", 1},  // after a reduction: factorized reduce of s2
                      LayerCase{"normal0.0", 1},   // normal after a reduction
                      LayerCase{"normal0.1", 1},   // normal after a normal: 1x1 conv of s2
                      LayerCase{"reduction2", 1},  // reduction after a normal
                      LayerCase{"normal2.1", 2},   // the last cell: no skip output
                      LayerCase{"classifier", 1}),
    [](const ::testing::TestParamInfo<LayerCase>& param_info) {
      std::string n = param_info.param.layer;
      std::replace(n.begin(), n.end(), '.', '_');
      return n;
    });

// ---- the op library, as plain layers ----

TEST(AmoebaOps, GradientsMatchFiniteDifferences) {
  struct OpCase {
    std::string name;
    LayerPtr<double> layer;
    std::vector<std::int64_t> in_shape;
  };
  std::vector<OpCase> cases;
  cases.push_back(
      {"factorized_reduce", std::make_unique<FactorizedReduce<double>>(3, 4, 1), {2, 6, 6, 3}});
  cases.push_back(
      {"factorized_reduce_odd", std::make_unique<FactorizedReduce<double>>(3, 4, 2), {2, 5, 7, 3}});
  for (AmoebaOp op : {AmoebaOp::kConv1x1, AmoebaOp::kConv3x3, AmoebaOp::kConv1x7_7x1,
                      AmoebaOp::kMaxPool3x3, AmoebaOp::kAvgPool3x3, AmoebaOp::kNone})
    cases.push_back(
        {std::string(amoeba_op_name(op)), make_amoeba_op<double>(op, 4, 1, 3), {2, 6, 6, 4}});
  for (AmoebaOp op : {AmoebaOp::kConv1x1, AmoebaOp::kConv3x3, AmoebaOp::kMaxPool3x3,
                      AmoebaOp::kMaxPool2x2, AmoebaOp::kAvgPool3x3, AmoebaOp::kNone})
    cases.push_back({std::string(amoeba_op_name(op)) + "_stride2",
                     make_amoeba_op<double>(op, 4, 2, 4),
                     {2, 6, 6, 4}});
  for (OpCase& c : cases) {
    testing::perturb_params(*c.layer, 7);
    const testing::GradErrors e = testing::check_gradients(*c.layer, random_tensor(c.in_shape, 11));
    std::printf("[ fd       ] %-22s dx %.2e  dparams %.2e\n", c.name.c_str(), e.input, e.params);
    // Central differences of a float64 loss: truncation and rounding leave up to ~1e-7 of the
    // largest entry, depending on the draw; a wrong gradient is off by O(1).
    EXPECT_LE(e.input, 1e-6) << c.name;
    EXPECT_LE(e.params, 1e-6) << c.name;
  }
}

TEST(AmoebaOps, RejectsWhatTheGenotypeNeverAsks) {
  EXPECT_THROW(make_amoeba_op<double>(AmoebaOp::kConv1x7_7x1, 4, 2, 1), std::invalid_argument);
  EXPECT_THROW(make_amoeba_op<double>(AmoebaOp::kMaxPool2x2, 4, 1, 1), std::invalid_argument);
}

// ---- the builder ----

TEST(AmoebaBuilder, ParameterCountsMatchTheSpecAtEveryLayer) {
  for (const WorkloadSpec& spec :
       {tiny_spec(3, 8, 32), tiny_spec(6, 8, 32), tiny_spec(3, 64, 64)}) {
    std::int64_t total = 0;
    for (const LayerSpec& l : spec.layers) {
      PipelineLayerPtr<float> layer = make_amoebanet_layer<float>(l, 1);
      EXPECT_EQ(num_params(*layer), l.params) << l.name;
      total += num_params(*layer);
    }
    EXPECT_EQ(total, spec.params());
    std::printf("[ params   ] %s: %lld in %zu layers\n", spec.config.dump().c_str(),
                static_cast<long long>(total), spec.layers.size());
  }
}

TEST(AmoebaBuilder, RejectsOtherKindsAndMissingAttrs) {
  LayerSpec mlp;
  mlp.name = "block";
  mlp.kind = LayerKind::kMlpBlock;
  EXPECT_THROW(make_amoebanet_layer<double>(mlp, 1), std::invalid_argument);
  LayerSpec cell = tiny_spec().layers[1];
  cell.attrs.erase("skip_channels");
  EXPECT_THROW(make_amoebanet_layer<double>(cell, 1), std::invalid_argument);
}

TEST(AmoebaClassifier, LossScaleScalesTheSeed) {
  const WorkloadSpec spec = tiny_spec();
  const std::size_t i = spec.layers.size() - 1;
  PipelineLayerPtr<double> head = make_amoebanet_layer<double>(spec.layers[i], 3);
  LayerInput x = random_input(spec, i, 8);
  auto grad = [&](double scale) {
    x.loss_scale = scale;
    Saved<double> s;
    head->forward(x.boundary, s, x.data());
    return head->backward_input({}, s, x.data()).front();
  };
  const Tensor<double> g1 = grad(1.0), gq = grad(0.25);
  for (std::size_t k = 0; k < g1.data.size(); ++k) EXPECT_DOUBLE_EQ(gq.data[k], 0.25 * g1.data[k]);
}

// ---- a whole tiny AmoebaNet, layer by layer ----

TEST(AmoebaModel, LossGradientsMatchFiniteDifferences) {
  const WorkloadSpec spec = tiny_spec(3, 8, 32);
  std::vector<PipelineLayerPtr<double>> layers;
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    layers.push_back(make_amoebanet_layer<double>(spec.layers[i], derive_seed(42, i)));
    perturb(*layers.back(), 100 + i);
  }
  LayerInput x = random_input(spec, 0, 9);
  const MicroBatchData<double> data = x.data();

  auto run_forward = [&](std::vector<Saved<double>>& saved) {
    Tensors<double> b;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      b = layers[i]->forward(std::move(b), saved[i], data);
      if (i + 1 < layers.size()) {
        EXPECT_EQ(b.size(), spec.layers[i].boundary_out.size()) << spec.layers[i].name;
        for (std::size_t k = 0; k < std::min(b.size(), spec.layers[i].boundary_out.size()); ++k)
          EXPECT_EQ(b[k].shape, nhwc(spec.layers[i].boundary_out[k])) << spec.layers[i].name;
      }
    }
    return b.at(0).data.at(0);
  };
  auto loss = [&] {
    std::vector<Saved<double>> saved(layers.size());
    return run_forward(saved);
  };

  std::vector<Saved<double>> saved(layers.size());
  run_forward(saved);
  for (auto& l : layers) zero_grad(*l);
  Tensors<double> g;
  for (std::size_t i = layers.size(); i-- > 0;)
    g = layers[i]->backward_input(std::move(g), saved[i], data);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    layers[i]->backward_weight(saved[i]);
    EXPECT_EQ(saved[i].bytes(), 0);
  }
  ASSERT_EQ(g.size(), 1u);
  ASSERT_EQ(g[0].shape, x.image[0].shape);

  // The loss of the whole net is far more curved than one layer's output (BatchNorm over 4
  // samples at the 1x1 cells): the central difference's eps^2 error reaches 1e-4 at eps = 1e-6
  // for the stem's parameters, and falls as eps^2. Richardson extrapolation cancels that term.
  const double eps = 1e-6;
  auto central = [&](double& v, double h) {
    const double v0 = v;
    v = v0 + h;
    const double lp = loss();
    v = v0 - h;
    const double lm = loss();
    v = v0;
    return (lp - lm) / (2 * h);
  };
  auto derivative = [&](double& v) { return (4 * central(v, eps / 2) - central(v, eps)) / 3; };
  std::vector<double> analytic, numeric;
  for (std::size_t i = 0; i < x.image[0].data.size(); i += 61) {
    analytic.push_back(g[0].data[i]);
    numeric.push_back(derivative(x.image[0].data[i]));
  }
  const double image_error = rel_error(analytic, numeric);

  // The middle entry of every parameter tensor, norm-wise per layer (see check_fd).
  double param_error = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    std::vector<double> a, n;
    for (Param<double>* p : layers[i]->params()) {
      const std::size_t j = p->value.data.size() / 2;
      a.push_back(p->grad.data[j]);
      n.push_back(derivative(p->value.data[j]));
    }
    const double err = rel_error(a, n);
    param_error = std::max(param_error, err);
  }
  std::printf("[ fd       ] whole model: d_image %.2e  dparams %.2e\n", image_error, param_error);
  EXPECT_LE(image_error, 1e-6);
  EXPECT_LE(param_error, 1e-6);
}

}  // namespace
}  // namespace ppbench::cpu
