// Shared by the GPU tests: a fixture that skips without a GPU, host <-> device helpers, parameter
// copies between the GPU layers (W [out, in], bf16 or f32) and the CPU float64 layers (W [in,
// out]), the relative error max|a - b| / max|b| of single kernels, and check_layer, which judges
// a layer's F, I and W against the CPU's within the reference's own spread at the dtype
// (tests/common/reference_spread.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/reference_spread.h"
#include "workloads/counter_rng.h"
#include "workloads/cpu/kernels.h"
#include "workloads/cuda/kernels.h"

namespace ppbench::cuda::testing {

// fp32: 1e-4, bf16: 2e-2 (issue 4's tolerances), against float64 on the same (rounded) inputs.
inline double tolerance(DType t) { return t == DType::kBF16 ? 2e-2 : 1e-4; }

class GpuTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    std::string why;
    if (!has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
    params_ = std::make_unique<DeviceArena>("test params", std::size_t{512} << 20);
    acts_ = std::make_unique<DeviceArena>("test activations", std::size_t{2} << 30);
    ctx_ = std::make_unique<Context>(*acts_);
  }
  void TearDown() override {
    if (ctx_) CUDA_CHECK(cudaDeviceSynchronize());
  }
  DType dtype() const { return GetParam(); }
  double tol() const { return tolerance(GetParam()); }
  // The dtype's unit roundoff: the size of the perturbations that measure the reference's spread.
  double roundoff() const {
    return ppbench::precision::unit_roundoff(dtype() == DType::kBF16 ? ppbench::DType::kBF16
                                                                     : ppbench::DType::kF32);
  }

  // Uniform values drawn by the CPU's Rng, rounded to the dtype so both sides see the same input.
  std::vector<float> random(std::int64_t n, std::uint64_t seed, double lo = -1, double hi = 1) {
    cpu::Rng rng(seed);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) {
      x = static_cast<float>(rng.uniform(lo, hi));
      if (dtype() == DType::kBF16) x = round_to_bf16(x);
    }
    return v;
  }
  DTensor device(const std::vector<float>& v, Shape shape, DType t) {
    DTensor d(*acts_, std::move(shape), t, "test input");
    upload(d, v);
    return d;
  }
  static cpu::Tensor<double> host(const std::vector<float>& v, const Shape& shape) {
    cpu::Tensor<double> t(shape);
    for (std::size_t i = 0; i < v.size(); ++i) t.data[i] = v[i];
    return t;
  }

  // F, then I with a random dy, then W, on both backends (the parameters copied GPU -> CPU, so
  // both see the same rounded values); compares y, dx and every gradient, and the saved-bytes
  // contract (I keeps no more than F plus dy; W empties). `vocab` > 0: token ids as input.
  void check_layer(Layer& g, cpu::Layer<double>& c, const Shape& in_shape, std::uint64_t seed,
                   std::int64_t vocab = 0);

  std::unique_ptr<DeviceArena> params_;
  std::unique_ptr<DeviceArena> acts_;
  std::unique_ptr<Context> ctx_;
};

template <typename Ref>  // any vector of doubles (the CPU tensors use an aligned allocator)
double rel_error(const std::vector<float>& a, const Ref& b) {
  double diff = 0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return a.size() == b.size() ? diff / scale : 1e30;
}

// The CPU layer gets exactly the GPU layer's (rounded) parameters.
inline void copy_params(Layer& g, cpu::Layer<double>& c) {
  std::vector<Param*> gp = g.params();
  std::vector<cpu::Param<double>*> cp = c.params();
  ASSERT_EQ(gp.size(), cp.size());
  for (std::size_t i = 0; i < gp.size(); ++i) {
    std::vector<float> v = download_cpu_layout(*gp[i], gp[i]->value);
    ASSERT_EQ(static_cast<std::int64_t>(v.size()), cp[i]->value.numel()) << gp[i]->name;
    for (std::size_t j = 0; j < v.size(); ++j) cp[i]->value.data[j] = v[j];
  }
}

// Sum of squares of the parameter gradients, GPU (f32) and CPU (float64) side.
inline double grad_square_sum(const std::vector<Param*>& ps) {
  double s = 0;
  for (Param* p : ps)
    for (float v : download(p->grad)) s += static_cast<double>(v) * v;
  return s;
}
inline double grad_square_sum(const std::vector<cpu::Param<double>*>& ps) {
  double s = 0;
  for (cpu::Param<double>* p : ps)
    for (double v : p->grad.data) s += v * v;
  return s;
}

// A whole-model step's loss and gradient norm (from the sums of squares) on both backends.
inline void expect_same_step(double loss_g, double square_sum_g, double loss_c, double square_sum_c,
                             double tol) {
  const double norm_g = std::sqrt(square_sum_g), norm_c = std::sqrt(square_sum_c);
  ASSERT_GT(norm_c, 0.0);
  EXPECT_LE(std::abs(loss_g - loss_c) / std::abs(loss_c), tol)
      << "loss gpu " << loss_g << " cpu " << loss_c;
  EXPECT_LE(std::abs(norm_g - norm_c) / norm_c, tol)
      << "gradient norm gpu " << norm_g << " cpu " << norm_c;
}

// F, I and W of the CPU float64 layer on `params`, the input `xv` and the output gradient `dyv`,
// each value perturbed by `relative` (0: as given; token ids never): the reference of check_layer
// and, perturbed by one rounding of the dtype, its spread (tests/common/reference_spread.h).
struct CpuLayerRun {
  Shape y_shape, dx_shape;
  std::vector<double> y, dx;
  std::vector<std::vector<double>> grads;
};
inline CpuLayerRun run_cpu_layer(cpu::Layer<double>& c,
                                 const std::vector<std::vector<double>>& params,
                                 const std::vector<float>& xv, const Shape& in_shape, bool tokens,
                                 const std::vector<float>& dyv, double relative,
                                 std::uint64_t key) {
  std::vector<cpu::Param<double>*> cp = c.params();
  for (std::size_t i = 0; i < cp.size(); ++i) {
    perturb_values(params[i], cp[i]->value.data.data(), relative, key, i);
    std::fill(cp[i]->grad.data.begin(), cp[i]->grad.data.end(), 0.0);
  }
  cpu::Tensor<double> x(in_shape);
  perturb_values(xv, x.data.data(), tokens ? 0.0 : relative, key, 1u << 20);
  cpu::Saved<double> sc;
  CpuLayerRun r;
  cpu::Tensor<double> y = c.forward(x, sc);
  r.y_shape = y.shape;
  r.y.assign(y.data.begin(), y.data.end());
  cpu::Tensor<double> dy(y.shape);
  perturb_values(dyv, dy.data.data(), relative, key, 1u << 21);
  cpu::Tensor<double> dx = c.backward_input(dy, sc);
  r.dx_shape = dx.shape;
  r.dx.assign(dx.data.begin(), dx.data.end());
  c.backward_weight(sc);
  for (cpu::Param<double>* p : cp) r.grads.emplace_back(p->grad.data.begin(), p->grad.data.end());
  return r;
}

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

inline void GpuTest::check_layer(Layer& g, cpu::Layer<double>& c, const Shape& in_shape,
                                 std::uint64_t seed, std::int64_t vocab) {
  using ppbench::precision::ReferenceSpread;
  using ppbench::precision::Verdict;
  copy_params(g, c);
  std::vector<std::vector<double>> params;
  for (cpu::Param<double>* p : c.params())
    params.emplace_back(p->value.data.begin(), p->value.data.end());
  const std::int64_t n = shape_numel(in_shape);
  const bool tokens = vocab > 0;
  std::vector<float> xv;
  if (tokens) {
    cpu::Rng rng(seed);
    for (std::int64_t i = 0; i < n; ++i)
      xv.push_back(static_cast<float>(std::floor(rng.uniform() * static_cast<double>(vocab))));
  } else {
    xv = random(n, seed);
  }
  DTensor x = device(xv, in_shape, tokens ? DType::kI32 : dtype());

  // The GPU layer: F, I, W, with the Saved contract (I keeps no more than F plus dy; W empties).
  Saved sg;
  DTensor y = g.forward(*ctx_, x, sg);
  const std::vector<float> yg = download(y);
  const std::int64_t after_f = sg.bytes();
  std::vector<float> dyv = random(y.numel(), seed + 1);
  DTensor dy = device(dyv, y.shape(), dtype());
  DTensor dx = g.backward_input(*ctx_, dy, sg);
  const std::vector<float> dxg = download(dx);
  dy.release();
  EXPECT_LE(sg.bytes(), after_f + static_cast<std::int64_t>(dyv.size() * dtype_size(dtype())))
      << g.name() << ": I keeps more than F plus dy";
  g.backward_weight(*ctx_, sg);
  EXPECT_EQ(sg.bytes(), 0) << g.name() << ": W must empty Saved";
  std::vector<Param*> gp = g.params();
  ASSERT_EQ(gp.size(), params.size());
  std::vector<std::vector<float>> grads;
  for (Param* p : gp) grads.push_back(download_cpu_layout(*p, p->grad));

  // The CPU reference, and the same perturbed by one rounding of the dtype.
  const CpuLayerRun ref = run_cpu_layer(c, params, xv, in_shape, tokens, dyv, 0, 0);
  ASSERT_EQ(y.shape(), ref.y_shape) << g.name();
  ASSERT_EQ(dx.shape(), ref.dx_shape) << g.name();
  std::vector<std::vector<std::vector<double>>> ys, dxs, gs;
  for (int k = 0; k < ppbench::precision::kPerturbedRuns; ++k) {
    const CpuLayerRun r =
        run_cpu_layer(c, params, xv, in_shape, tokens, dyv, roundoff(), seed + 1000 + k);
    ys.push_back({r.y});
    dxs.push_back({r.dx});
    gs.push_back(r.grads);
  }
  const double tl = tol();
  const ReferenceSpread y_ref({ref.y}, ys, tl), dx_ref({ref.dx}, dxs, tl),
      grad_ref(ref.grads, gs, tl);
  const Verdict fv = y_ref.judge(0, widen(yg));
  EXPECT_TRUE(fv.ok()) << g.name() << " F: " << ppbench::precision::describe(fv);
  if (!tokens) {
    const Verdict iv = dx_ref.judge(0, widen(dxg));
    EXPECT_TRUE(iv.ok()) << g.name() << " I: " << ppbench::precision::describe(iv);
  }
  for (std::size_t i = 0; i < gp.size(); ++i) {
    const Verdict wv = grad_ref.judge(i, widen(grads[i]));
    EXPECT_TRUE(wv.ok()) << g.name() << " W " << gp[i]->name << ": "
                         << ppbench::precision::describe(wv);
  }

  // W adds to the gradients (a micro-batch's dW += ...): the same micro-batch once more doubles
  // every one of them, which a product that overwrote them (beta = 0) would not.
  Saved again;
  DTensor y2 = g.forward(*ctx_, x, again);
  DTensor dy2 = device(dyv, y2.shape(), dtype());
  DTensor dx2 = g.backward_input(*ctx_, dy2, again);
  dy2.release();
  g.backward_weight(*ctx_, again);
  std::vector<std::vector<double>> twice = ref.grads;
  for (auto& t : twice)
    for (double& v : t) v *= 2;
  for (auto& run : gs)
    for (auto& t : run)
      for (double& v : t) v *= 2;
  const ReferenceSpread twice_ref(twice, gs, tl);
  for (std::size_t i = 0; i < gp.size(); ++i) {
    const Verdict wv = twice_ref.judge(i, widen(download_cpu_layout(*gp[i], gp[i]->grad)));
    EXPECT_TRUE(wv.ok()) << g.name() << " W twice " << gp[i]->name << ": "
                         << ppbench::precision::describe(wv);
  }
}

}  // namespace ppbench::cuda::testing
