// AmoebaNet-D on the GPU against the CPU float64 implementation, in f32 (relative error <= 1e-4)
// and bf16 (<= 2e-2):
//   - the factorized reduce (the strided "none") and its pixel picks, odd sizes included;
//   - the stem, both cell kinds (one or two inputs, with and without `skip`, every kind of s2
//     preprocessing, the reduction cell's strided ops) and the pool classifier with its loss,
//     each through F, I and W on random inputs, with the Saved contract;
//   - a whole small AmoebaNet step over several micro-batches, layer by layer, and through the
//     CUDA backend (run_cuda: one GPU, and virtual devices with one- and two-tensor stage
//     boundaries) against the CPU backend's single-device step: loss and gradient norm.
// The GPU tests skip without a device; the host-side ones (the backend accepts amoebanet, two-
// tensor boundaries travel packed) always run.
#include <cmath>
#include <functional>
#include <string>

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "harness/backends/cpu/cpu_run.h"
#include "harness/cuda/cuda_executor.h"
#include "harness/cuda/cuda_run.h"
#include "harness/cuda/gpu_model.h"
#include "schedules/registry.h"
#include "tests/cuda/gpu_test_util.h"
#include "tests/cuda_exec/gpu_watchdog.h"
#include "tests/cuda_exec/run_matches_cpu.h"
#include "workloads/amoebanet.h"
#include "workloads/cpu/amoebanet_cells.h"
#include "workloads/cuda/amoebanet_cells.h"
#include "workloads/cuda/pick_pixels.h"
#include "workloads/partition.h"

namespace ppbench::cuda::testing {
namespace {

// A GPU layer seen through the CPU PipelineLayer's interface (lists of tensors), so that one
// check covers one-tensor layers, the stem and the cells.
struct GpuUnit {
  std::function<DTensors(DTensors, Saved&)> forward, backward_input;
  std::function<void(Saved&)> backward_weight;
  std::vector<Param*> params;
};

// The CPU layer gets exactly the GPU layer's (rounded) parameters, in the same order.
void copy_to_cpu(const std::vector<Param*>& gp, const std::vector<cpu::Param<double>*>& cp) {
  ASSERT_EQ(gp.size(), cp.size());
  for (std::size_t i = 0; i < gp.size(); ++i) {
    const std::vector<float> v = download_cpu_layout(*gp[i], gp[i]->value);
    ASSERT_EQ(static_cast<std::int64_t>(v.size()), cp[i]->value.numel()) << gp[i]->name;
    for (std::size_t j = 0; j < v.size(); ++j) cp[i]->value.data[j] = v[j];
  }
}

double grad_error(const Param& g, const cpu::Param<double>& c) {
  return rel_error(download_cpu_layout(g, g.grad), c.grad.data);
}

AmoebaNetConfig small_amoebanet() {
  // stem 64 -> 32 px, reductions to 16, 8 (normal), 4 (normal), 2 (normal): every BatchNorm sees
  // at least 8 values per channel at micro-batch 2.
  AmoebaNetConfig c;
  c.layers = 3, c.filters = 16, c.image_size = 64, c.classes = 5;
  return c;
}

// F, I and W of a CPU float64 unit on `params`, the inputs `xv` and the output gradients `dyv`,
// every value perturbed by `relative` (0: as given): check()'s reference and, perturbed by one
// rounding of the dtype, its spread.
struct UnitRun {
  std::vector<Shape> y_shapes, dx_shapes;
  std::vector<std::vector<double>> y, dx, grads;
};
UnitRun run_cpu_unit(cpu::PipelineLayer<double>& c, const std::vector<std::vector<double>>& params,
                     const std::vector<std::vector<float>>& xv, const std::vector<Shape>& shapes,
                     const std::vector<std::vector<float>>& dyv, double relative,
                     std::uint64_t key) {
  std::vector<cpu::Param<double>*> cp = c.params();
  for (std::size_t i = 0; i < cp.size(); ++i) {
    perturb_values(params[i], cp[i]->value.data.data(), relative, key, i);
    std::fill(cp[i]->grad.data.begin(), cp[i]->grad.data.end(), 0.0);
  }
  cpu::Tensors<double> x;
  for (std::size_t k = 0; k < xv.size(); ++k) {
    x.emplace_back(shapes[k]);
    perturb_values(xv[k], x.back().data.data(), relative, key, (1u << 20) + k);
  }
  const cpu::Tensors<double> data = x;
  cpu::MicroBatchData<double> md;
  md.inputs = &data;
  cpu::Saved<double> sc;
  UnitRun r;
  const cpu::Tensors<double> y = c.forward(std::move(x), sc, md);
  cpu::Tensors<double> dy;
  for (std::size_t i = 0; i < y.size(); ++i) {
    r.y_shapes.push_back(y[i].shape);
    r.y.emplace_back(y[i].data.begin(), y[i].data.end());
    dy.emplace_back(y[i].shape);
    perturb_values(dyv.at(i), dy.back().data.data(), relative, key, (1u << 21) + i);
  }
  const cpu::Tensors<double> dx = c.backward_input(std::move(dy), sc, md);
  for (const cpu::Tensor<double>& t : dx) {
    r.dx_shapes.push_back(t.shape);
    r.dx.emplace_back(t.data.begin(), t.data.end());
  }
  c.backward_weight(sc);
  for (cpu::Param<double>* p : cp) r.grads.emplace_back(p->grad.data.begin(), p->grad.data.end());
  return r;
}

class Amoeba : public GpuTest {
 protected:
  GpuUnit unit(Layer& l) {
    return {[this, &l](DTensors x, Saved& s) { return DTensors{l.forward(*ctx_, x.at(0), s)}; },
            [this, &l](DTensors dy, Saved& s) {
              return DTensors{l.backward_input(*ctx_, dy.at(0), s)};
            },
            [this, &l](Saved& s) { l.backward_weight(*ctx_, s); }, l.params()};
  }
  GpuUnit unit(AmoebaCell& c) {
    return {[this, &c](DTensors x, Saved& s) { return c.forward(*ctx_, std::move(x), s); },
            [this, &c](DTensors dy, Saved& s) { return c.backward_input(*ctx_, std::move(dy), s); },
            [this, &c](Saved& s) { c.backward_weight(*ctx_, s); }, c.params()};
  }

  // F on random inputs, I on random output gradients, then W, on both backends (parameters
  // copied GPU -> CPU, so both see the same rounded values): compares every output, input
  // gradient and parameter gradient within the reference's own spread at the dtype
  // (tests/common/reference_spread.h), and the Saved contract (I keeps no more than F plus the
  // output gradients; W empties it). The inputs double as the micro-batch data (the stem's).
  void check(const GpuUnit& g, cpu::PipelineLayer<double>& c, const std::vector<Shape>& in_shapes,
             std::uint64_t seed) {
    using ppbench::precision::ReferenceSpread;
    using ppbench::precision::Verdict;
    copy_to_cpu(g.params, c.params());
    std::vector<std::vector<double>> params;
    for (cpu::Param<double>* p : c.params())
      params.emplace_back(p->value.data.begin(), p->value.data.end());
    std::vector<std::vector<float>> xv;
    DTensors xg;
    for (std::size_t k = 0; k < in_shapes.size(); ++k) {
      xv.push_back(random(shape_numel(in_shapes[k]), seed + 100 * k));
      xg.push_back(device(xv.back(), in_shapes[k], dtype()));
    }

    Saved sg;
    DTensors yg = g.forward(xg, sg);
    std::vector<std::vector<float>> y_got;
    for (const DTensor& y : yg) y_got.push_back(download(y));
    const std::int64_t after_f = sg.bytes();
    std::vector<std::vector<float>> dyv;
    DTensors dyg;
    std::int64_t dy_bytes = 0;
    for (std::size_t i = 0; i < yg.size(); ++i) {
      dyv.push_back(random(yg[i].numel(), seed + 1 + 100 * i));
      dyg.push_back(device(dyv.back(), yg[i].shape(), dtype()));
      dy_bytes += dyg.back().bytes();
    }
    std::vector<Shape> y_shapes;
    for (const DTensor& y : yg) y_shapes.push_back(y.shape());
    yg.clear();
    const DTensors dxg = g.backward_input(dyg, sg);
    std::vector<std::vector<float>> dx_got;
    std::vector<Shape> dx_shapes;
    for (const DTensor& dx : dxg) dx_got.push_back(download(dx)), dx_shapes.push_back(dx.shape());
    dyg.clear();
    EXPECT_LE(sg.bytes(), after_f + dy_bytes) << "I keeps more than F plus the output gradients";
    g.backward_weight(sg);
    EXPECT_EQ(sg.bytes(), 0) << "W must empty Saved";
    ASSERT_EQ(g.params.size(), params.size());
    std::vector<std::vector<float>> grads;
    for (Param* p : g.params) grads.push_back(download_cpu_layout(*p, p->grad));

    const UnitRun ref = run_cpu_unit(c, params, xv, in_shapes, dyv, 0, 0);
    ASSERT_EQ(y_shapes, ref.y_shapes);
    ASSERT_EQ(dx_shapes, ref.dx_shapes);
    std::vector<std::vector<std::vector<double>>> ys, dxs, gs;
    for (int k = 0; k < ppbench::precision::kPerturbedRuns; ++k) {
      UnitRun r = run_cpu_unit(c, params, xv, in_shapes, dyv, roundoff(), seed + 1000 + k);
      ys.push_back(std::move(r.y));
      dxs.push_back(std::move(r.dx));
      gs.push_back(std::move(r.grads));
    }
    const ReferenceSpread y_ref(ref.y, ys, tol()), dx_ref(ref.dx, dxs, tol()),
        grad_ref(ref.grads, gs, tol());
    for (std::size_t i = 0; i < y_got.size(); ++i) {
      const Verdict v = y_ref.judge(i, widen(y_got[i]));
      EXPECT_TRUE(v.ok()) << "F, output " << i << ": " << ppbench::precision::describe(v);
    }
    for (std::size_t i = 0; i < dx_got.size(); ++i) {
      const Verdict v = dx_ref.judge(i, widen(dx_got[i]));
      EXPECT_TRUE(v.ok()) << "I, input gradient " << i << ": " << ppbench::precision::describe(v);
    }
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const Verdict v = grad_ref.judge(i, widen(grads[i]));
      EXPECT_TRUE(v.ok()) << "W, parameter " << i << " " << g.params[i]->name << ": "
                          << ppbench::precision::describe(v);
    }
  }

  void cell(const AmoebaCellConfig& config, const std::vector<Shape>& in_shapes,
            std::uint64_t seed) {
    AmoebaCell g(*params_, config, dtype(), seed);
    cpu::AmoebaCell<double> c(config, seed);
    ASSERT_EQ(g.out_channels(), c.out_channels());
    check(unit(g), c, in_shapes, seed);
  }
};

// ---- the factorized reduce ----

TEST_P(Amoeba, PickPixelsAndTheirBackwardAreExact) {
  const Shape full{2, 7, 5, 3}, half{2, 4, 3, 3};
  const std::vector<float> xv = random(shape_numel(full), 1);
  const DTensor x = device(xv, full, dtype());
  auto at = [](const Shape& s, std::int64_t b, std::int64_t y, std::int64_t x_, std::int64_t ch) {
    return static_cast<std::size_t>(((b * s[1] + y) * s[2] + x_) * s[3] + ch);
  };
  for (std::int64_t offset : {0, 1}) {
    std::vector<float> want(static_cast<std::size_t>(shape_numel(half)), 0.0f);
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t i = 0; i < half[1]; ++i)
        for (std::int64_t j = 0; j < half[2]; ++j)
          for (std::int64_t ch = 0; ch < 3; ++ch) {
            const std::int64_t iy = 2 * i + offset, ix = 2 * j + offset;
            if (iy < full[1] && ix < full[2])
              want[at(half, b, i, j, ch)] = xv[at(full, b, iy, ix, ch)];
          }
    const DTensor y = pick_pixels(*ctx_, x, offset);
    ASSERT_EQ(y.shape(), half);
    EXPECT_EQ(download(y), want) << "offset " << offset;
  }
  const std::vector<float> ev = random(shape_numel(half), 2), ov = random(shape_numel(half), 3);
  std::vector<float> want(static_cast<std::size_t>(shape_numel(full)), 0.0f);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < half[1]; ++i)
      for (std::int64_t j = 0; j < half[2]; ++j)
        for (std::int64_t ch = 0; ch < 3; ++ch) {
          want[at(full, b, 2 * i, 2 * j, ch)] += ev[at(half, b, i, j, ch)];
          if (2 * i + 1 < full[1] && 2 * j + 1 < full[2])
            want[at(full, b, 2 * i + 1, 2 * j + 1, ch)] += ov[at(half, b, i, j, ch)];
        }
  const DTensor dx =
      unpick_pixels(*ctx_, device(ev, half, dtype()), device(ov, half, dtype()), full);
  EXPECT_EQ(download(dx), want);
}

TEST_P(Amoeba, FactorizedReduceOddImage) {
  FactorizedReduce g(*params_, 10, 12, dtype(), 3);
  cpu::SingleTensorLayer<double> c(std::make_unique<cpu::FactorizedReduce<double>>(10, 12, 3));
  check(unit(g), c, {{2, 7, 5, 10}}, 3);
}

TEST_P(Amoeba, FactorizedReduceEvenImage) {
  FactorizedReduce g(*params_, 12, 12, dtype(), 4);
  cpu::SingleTensorLayer<double> c(std::make_unique<cpu::FactorizedReduce<double>>(12, 12, 4));
  check(unit(g), c, {{3, 6, 8, 12}}, 4);
}

TEST_P(Amoeba, StridedNoneIsAFactorizedReduce) {
  LayerPtr g = make_amoeba_op(*params_, AmoebaOp::kNone, 20, 2, dtype(), 5);
  cpu::SingleTensorLayer<double> c(cpu::make_amoeba_op<double>(AmoebaOp::kNone, 20, 2, 5));
  EXPECT_EQ(g->name(), "factorized_reduce");
  check(unit(*g), c, {{2, 5, 9, 20}}, 5);
}

TEST_P(Amoeba, FactorizedReduceRefusesOddChannels) {
  EXPECT_THROW((void)FactorizedReduce(*params_, 8, 7, dtype(), 6), std::invalid_argument);
}

// ---- stem, cells, classifier ----

TEST_P(Amoeba, StemOddImage) {
  LayerPtr g = make_amoeba_stem(*params_, 3, 12, dtype(), 7);
  cpu::AmoebaStem<double> c(3, 12, 7);
  check(unit(*g), c, {{2, 9, 11, 3}}, 7);
}

// s2 as wide as s1 and of another width (ReLU-1x1 conv-BN), odd image, channels not a power of
// two, passing {out, skip} on.
TEST_P(Amoeba, NormalCellOddImage) {
  AmoebaCellConfig k;
  k.channels = 12, k.in_channels = 20, k.skip_channels = 16;
  cell(k, {{2, 5, 7, 20}, {2, 5, 7, 16}}, 8);
}

// After a reduction cell: s2 is twice s1's size (odd here) and goes through a factorized reduce;
// the last cell, so no skip.
TEST_P(Amoeba, NormalCellAfterAReductionLastCell) {
  AmoebaCellConfig k;
  k.channels = 8, k.in_channels = 24, k.skip_channels = 12, k.reduction_prev = true;
  k.emits_skip = false;
  cell(k, {{2, 4, 3, 24}, {2, 7, 5, 12}}, 9);
}

// One input standing for s1 and s2 with s2's preprocessing the identity: the identity ops and
// state sums share buffers in both directions, and the two input gradients add up.
TEST_P(Amoeba, NormalCellOneInputIdentityPreprocessing) {
  AmoebaCellConfig k;
  k.channels = 12, k.in_channels = 12, k.skip_channels = 12;
  cell(k, {{2, 5, 5, 12}}, 10);
}

// The first cell after the stem: one input, strided ops on states 0 and 1 (max-pools 2x2 and 3x3,
// the bottleneck 3x3 conv).
TEST_P(Amoeba, ReductionCellReadingTheStem) {
  AmoebaCellConfig k;
  k.reduction = true, k.channels = 8, k.in_channels = 4, k.skip_channels = 4;
  cell(k, {{2, 6, 10, 4}}, 11);
}

// A reduction right after a reduction (s2 through a factorized reduce), channels not a power of
// two.
TEST_P(Amoeba, ReductionCellAfterAReduction) {
  AmoebaCellConfig k;
  k.reduction = true, k.channels = 12, k.in_channels = 24, k.skip_channels = 4;
  k.reduction_prev = true;
  cell(k, {{2, 4, 6, 24}, {2, 8, 12, 4}}, 12);
}

TEST_P(Amoeba, PoolClassifierWithItsLoss) {
  const Shape in{3, 3, 5, 24};
  constexpr std::int64_t kClasses = 7;
  LayerPtr g = make_amoeba_classifier_head(*params_, 24, kClasses, dtype(), 13);
  cpu::AmoebaPoolClassifier<double> c(24, kClasses, 13);
  copy_to_cpu(g->params(), c.params());
  const std::vector<float> xv = random(shape_numel(in), 13);
  cpu::Rng rng(14);
  std::vector<float> tv;
  for (int i = 0; i < 3; ++i)
    tv.push_back(std::floor(static_cast<float>(rng.uniform() * kClasses)));
  const std::vector<std::int32_t> targets(tv.begin(), tv.end());
  cpu::MicroBatchData<double> md;
  md.targets = &targets;
  md.loss_scale = 0.5;

  SoftmaxCrossEntropy ce;
  Saved sg, sl;
  cpu::Saved<double> sc;
  const DTensor logits = g->forward(*ctx_, device(xv, in, dtype()), sg);
  const DTensor loss = ce.forward(*ctx_, logits, device(tv, {3}, DType::kI32), sl);
  cpu::Tensors<double> xc;
  xc.push_back(host(xv, in));
  const cpu::Tensors<double> lc = c.forward(std::move(xc), sc, md);
  EXPECT_LE(rel_error(download(loss), lc.at(0).data), tol()) << "loss";

  const DTensor dx = g->backward_input(*ctx_, ce.backward_input(*ctx_, sl, 0.5f), sg);
  const cpu::Tensors<double> dxc = c.backward_input({}, sc, md);
  ASSERT_EQ(dx.shape(), dxc.at(0).shape);
  EXPECT_LE(rel_error(download(dx), dxc.at(0).data), tol()) << "I";
  g->backward_weight(*ctx_, sg);
  c.backward_weight(sc);
  EXPECT_EQ(sg.bytes(), 0);
  const std::vector<Param*> gp = g->params();
  const std::vector<cpu::Param<double>*> cp = c.params();
  ASSERT_EQ(gp.size(), cp.size());
  for (std::size_t i = 0; i < cp.size(); ++i)
    EXPECT_LE(grad_error(*gp[i], *cp[i]), tol()) << "W " << gp[i]->name;
}

TEST_P(Amoeba, CellsFromTheSpecMatchTheCpuBuilder) {
  const WorkloadSpec spec = build_amoebanet(small_amoebanet(), 2, ppbench::DType::kF32);
  for (std::size_t l = 1; l + 1 < spec.layers.size(); ++l) {
    const std::uint64_t seed = cpu::derive_seed(15, l);
    std::unique_ptr<AmoebaCell> g = make_amoeba_cell(*params_, spec.layers[l], dtype(), seed);
    cpu::PipelineLayerPtr<double> c = cpu::make_amoebanet_layer<double>(spec.layers[l], seed);
    EXPECT_EQ(g->name(), c->name()) << spec.layers[l].name;
    EXPECT_EQ(g->config().emits_skip, spec.layers[l].boundary_out.size() == 2);
    std::int64_t n = 0;
    for (Param* p : g->params()) n += p->value.numel();
    EXPECT_EQ(n, spec.layers[l].params) << spec.layers[l].name;
    EXPECT_EQ(g->params().size(), c->params().size()) << spec.layers[l].name;
  }
}

// ---- a whole model ----

// Every layer of a small AmoebaNet, F over each micro-batch, then I and W in reverse per
// micro-batch, the CPU layers holding the GPU's (rounded) parameters: mean loss and global
// gradient norm within the layer tolerances.
TEST_P(Amoeba, WholeModelStepMatchesTheCpu) {
  constexpr int kMicroBatches = 2;
  constexpr std::uint64_t kSeed = 2025;
  const WorkloadSpec spec = build_amoebanet(small_amoebanet(), 2, ppbench::DType::kF32);
  const std::size_t layers = spec.layers.size();
  std::vector<LayerPtr> owned;
  std::vector<std::unique_ptr<AmoebaCell>> cells;
  std::vector<GpuUnit> g;  // the head last, giving logits
  std::vector<cpu::PipelineLayerPtr<double>> c;
  for (std::size_t l = 0; l < layers; ++l) {
    const LayerSpec& ls = spec.layers[l];
    const std::uint64_t seed = cpu::derive_seed(kSeed, l);
    if (ls.kind == LayerKind::kAmoebaStem) {
      owned.push_back(make_amoeba_stem(*params_, ls.attrs.at("in_channels"),
                                       ls.attrs.at("out_channels"), dtype(), seed));
      g.push_back(unit(*owned.back()));
    } else if (ls.kind == LayerKind::kPoolClassifier) {
      owned.push_back(make_amoeba_classifier_head(*params_, ls.attrs.at("in_channels"),
                                                  ls.attrs.at("classes"), dtype(), seed));
      g.push_back(unit(*owned.back()));
    } else {
      cells.push_back(make_amoeba_cell(*params_, ls, dtype(), seed));
      g.push_back(unit(*cells.back()));
    }
    c.push_back(cpu::make_amoebanet_layer<double>(ls, seed));
    copy_to_cpu(g.back().params, c.back()->params());
  }

  // Images (NHWC) rounded to the dtype, so both sides see the same input, and class targets.
  const Shape image{2, spec.input.shape[2], spec.input.shape[3], spec.input.shape[1]};
  cpu::Rng rng(kSeed + 1);
  std::vector<std::vector<float>> images, targets;
  for (int m = 0; m < kMicroBatches; ++m) {
    images.push_back(random(shape_numel(image), kSeed + 10 + static_cast<std::uint64_t>(m)));
    std::vector<float> t;
    for (int i = 0; i < 2; ++i)
      t.push_back(std::floor(static_cast<float>(
          rng.uniform() * static_cast<double>(spec.layers.back().attrs.at("classes")))));
    targets.push_back(t);
  }

  SoftmaxCrossEntropy ce;
  std::vector<std::vector<Saved>> sg(kMicroBatches, std::vector<Saved>(layers));
  std::vector<Saved> loss_saved(kMicroBatches);
  std::vector<DTensor> losses;
  for (int m = 0; m < kMicroBatches; ++m) {
    DTensors x{device(images[m], image, dtype())};
    for (std::size_t l = 0; l < layers; ++l) x = g[l].forward(std::move(x), sg[m][l]);
    losses.push_back(
        ce.forward(*ctx_, x.at(0), device(targets[m], {2}, DType::kI32), loss_saved[m]));
  }
  for (int m = 0; m < kMicroBatches; ++m) {
    DTensors dy{ce.backward_input(*ctx_, loss_saved[m], 1.0f / kMicroBatches)};
    for (std::size_t l = layers; l-- > 0;) {
      dy = g[l].backward_input(std::move(dy), sg[m][l]);
      g[l].backward_weight(sg[m][l]);
      EXPECT_EQ(sg[m][l].bytes(), 0) << spec.layers[l].name << ": Saved not emptied";
    }
  }
  double loss_g = 0;
  for (const DTensor& l : losses) loss_g += download(l)[0] / kMicroBatches;
  double square_g = 0;
  for (std::size_t l = 0; l < layers; ++l) square_g += grad_square_sum(g[l].params);

  // The CPU model on the GPU's parameters and images, each value perturbed by `relative` (0: as
  // given): {mean loss, gradient norm}.
  std::vector<std::vector<std::vector<double>>> cpu_params(layers);
  for (std::size_t l = 0; l < layers; ++l)
    for (cpu::Param<double>* p : c[l]->params())
      cpu_params[l].emplace_back(p->value.data.begin(), p->value.data.end());
  auto cpu_step = [&](double relative, std::uint64_t key) {
    std::uint64_t stream = 0;
    auto perturb = [&](const auto& from, double* to) {
      perturb_values(from, to, relative, key, stream++);
    };
    for (std::size_t l = 0; l < layers; ++l) {
      std::vector<cpu::Param<double>*> cp = c[l]->params();
      for (std::size_t i = 0; i < cp.size(); ++i) {
        perturb(cpu_params[l][i], cp[i]->value.data.data());
        std::fill(cp[i]->grad.data.begin(), cp[i]->grad.data.end(), 0.0);
      }
    }
    double loss = 0;
    for (int m = 0; m < kMicroBatches; ++m) {
      cpu::Tensors<double> data{cpu::Tensor<double>(image)};
      perturb(images[m], data[0].data.data());
      const std::vector<std::int32_t> t(targets[m].begin(), targets[m].end());
      const cpu::MicroBatchData<double> md{&data, &t, 1.0 / kMicroBatches};
      std::vector<cpu::Saved<double>> sc(layers);
      cpu::Tensors<double> x;
      for (std::size_t l = 0; l < layers; ++l) x = c[l]->forward(std::move(x), sc[l], md);
      loss += x.at(0).data.at(0) / kMicroBatches;
      for (std::size_t l = layers; l-- > 0;) {
        x = c[l]->backward_input(std::move(x), sc[l], md);
        c[l]->backward_weight(sc[l]);
      }
    }
    double square = 0;
    for (std::size_t l = 0; l < layers; ++l) square += grad_square_sum(c[l]->params());
    return std::vector<std::vector<double>>{{loss}, {std::sqrt(square)}};
  };
  const std::vector<std::vector<double>> ref = cpu_step(0, 0);
  std::vector<std::vector<std::vector<double>>> perturbed;
  for (int k = 0; k < ppbench::precision::kPerturbedRuns; ++k)
    perturbed.push_back(cpu_step(roundoff(), kSeed + 1000 + k));
  // The loss and the gradient norm each on its own scale: in one set, the floor of a tenth of
  // the set's largest RMS would let the norm (tens) loosen the loss (about 1.5) many-fold.
  auto spread_of = [&](std::size_t i) {
    std::vector<std::vector<std::vector<double>>> runs;
    for (const auto& run : perturbed) runs.push_back({run[i]});
    return ppbench::precision::ReferenceSpread({ref[i]}, runs, tol());
  };
  const ppbench::precision::ReferenceSpread loss_spread = spread_of(0), norm_spread = spread_of(1);
  const ppbench::precision::Verdict lv = loss_spread.judge(0, std::vector<double>{loss_g});
  EXPECT_TRUE(lv.ok()) << "loss gpu " << loss_g << " cpu " << ref[0][0] << ", "
                       << ppbench::precision::describe(lv);
  const ppbench::precision::Verdict nv =
      norm_spread.judge(0, std::vector<double>{std::sqrt(square_g)});
  EXPECT_TRUE(nv.ok()) << "gradient norm gpu " << std::sqrt(square_g) << " cpu " << ref[1][0]
                       << ", " << ppbench::precision::describe(nv);
}

// The same small model through the CUDA backend (gpu_model.h: layers built from the spec, stage
// boundaries of one or two tensors packed and unpacked, the loss head) against the CPU backend's
// float64 single-device step from the same seed: one GPU, then virtual devices with explicit
// partitions whose boundaries fall after the stem (one tensor) and after cells ({out, skip}),
// with B and with split I / W.
class AmoebaRun : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    std::string why;
    if (!has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  }
  // run_cuda leaves current the last rank's context, a green context it has destroyed with its
  // virtual devices: the primary context goes back, so later tests in this binary find a live one.
  void TearDown() override {
    if (has_gpu()) CUDA_CHECK(cudaSetDevice(0));
  }
  DType dtype() const { return GetParam(); }
  // A whole model in bf16 against float64 with unrounded parameters: 5e-2 per tensor (see
  // tests/cuda_exec/test_equivalence.cpp); f32 keeps the layers' 1e-4.
  double tol() const { return GetParam() == DType::kBF16 ? 5e-2 : tolerance(GetParam()); }
};

TEST_P(AmoebaRun, CudaBackendStepMatchesTheCpuBackend) {
  const WorkloadSpec spec = build_amoebanet(
      small_amoebanet(), 2, dtype() == DType::kBF16 ? ppbench::DType::kBF16 : ppbench::DType::kF32);
  struct Case {
    const char* schedule;
    int devices, microbatches;
    const char* partition;
  };
  constexpr Case kCases[] = {{"gpipe", 1, 2, "balanced"},
                             {"1f1b", 2, 4, "4,5"},
                             {"zb-h1", 4, 8, "1,3,3,2"},
                             {"dualpipev", 2, 4, "1,3,3,2"}};
  int ran = 0;
  for (const Case& k : kCases) {
    const std::string label =
        std::string(k.schedule) + " D=" + std::to_string(k.devices) + " partition " + k.partition;
    CudaRunOptions o;
    o.run.schedule = {k.schedule, k.devices, k.microbatches, 0, 0};
    o.run.partition = k.partition;
    o.run.seed = 77;
    o.run.executor.watchdog_seconds = ppbench::gpu_test_watchdog_seconds();
    if (k.devices > 1) o.virtual_devices = k.devices;
    o.activation_arena_bytes = std::size_t{256} << 20;
    if (!run_and_compare_with_cpu(spec, o, tol(), label)) continue;
    ++ran;
  }
  EXPECT_EQ(ran, 4);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Amoeba, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return dtype_name(i.param);
                         });
INSTANTIATE_TEST_SUITE_P(Dtypes, AmoebaRun, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return dtype_name(i.param);
                         });

// ---- host side (no GPU needed) ----

TEST(AmoebaHost, TheCudaBackendAcceptsAmoebaNet) {
  CudaRunOptions o;
  o.run.schedule = {"1f1b", 2, 4, 0, 0};
  EXPECT_NO_THROW(
      check_cuda_run_options(build_amoebanet(small_amoebanet(), 2, ppbench::DType::kBF16), o));
  EXPECT_THROW(
      check_cuda_run_options(build_amoebanet(small_amoebanet(), 2, ppbench::DType::kF64), o),
      UsageError);
}

// After the stem the boundary is one image; after a cell that feeds another cell it is {out,
// skip}, sent as one flat tensor of both sizes; the last stage sends nothing. The transfer plan
// built on those sizes is deadlock-free.
TEST(AmoebaHost, TwoTensorBoundariesTravelPacked) {
  const WorkloadSpec spec = build_amoebanet(small_amoebanet(), 2, ppbench::DType::kF32);
  const Schedule s = generate({"1f1b", 4, 8, 0, 0});
  const PartitionPlan plan = partition(spec, 4, "1,3,3,2");
  const std::vector<Shape> shapes = cuda::stage_output_shapes(spec, plan, s.placement);
  ASSERT_EQ(shapes.size(), 4u);
  EXPECT_EQ(shapes[0], spec.layers[0].boundary_out.at(0).shape);
  for (int st : {1, 2}) {
    const LayerSpec& last = spec.layers[static_cast<std::size_t>(
        plan.stages[static_cast<std::size_t>(st)].first_layer +
        plan.stages[static_cast<std::size_t>(st)].num_layers - 1)];
    ASSERT_EQ(last.boundary_out.size(), 2u) << last.name;
    EXPECT_EQ(
        shapes[static_cast<std::size_t>(st)],
        (Shape{shape_numel(last.boundary_out[0].shape) + shape_numel(last.boundary_out[1].shape)}))
        << "stage " << st;
  }
  EXPECT_TRUE(shapes[3].empty());
  EXPECT_NO_THROW(cuda::check_transfer_plan(s, shapes, DType::kF32));
}

}  // namespace
}  // namespace ppbench::cuda::testing
