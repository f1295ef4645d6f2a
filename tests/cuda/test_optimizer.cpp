// The optimizer kernels (workloads/cuda/optimizer.h) against the CPU backend's (workloads/cpu/
// optimizer.h) on the same inputs, f32 and bf16 parameters: three AdamW steps with the step
// counter on the device, and SGD. The f32 CPU kernel is the reference for both dtypes: a bf16
// parameter is stepped on its f32 master copy (either optimizer), so the master must follow the
// f32 reference and the parameter must be that master rounded. Skips without a GPU.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cuda/gpu_test_util.h"
#include "workloads/cpu/optimizer.h"
#include "workloads/cuda/optimizer.h"

namespace ppbench::cuda::testing {
namespace {

// Largest |a - b| over the largest |b|: 0 for equal vectors.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a.at(i)) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? worst / scale : worst;
}

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

using Optimizers = GpuTest;

// The CPU's f32 arithmetic and the GPU's differ at most by a contracted multiply-add per
// operation: a few ulps of f32. bf16 parameters may round the other way at a tie.
constexpr double kF32Tol = 1e-6;
constexpr double kBf16Tol = 1e-2;

TEST_P(Optimizers, AdamWMatchesTheCpuKernelOverThreeSteps) {
  const std::int64_t n = 3000;
  const std::vector<float> p0 = random(n, 11);
  const AdamWHyper h{1e-2, 0.1, 0.9, 0.999, 1e-8};
  DTensor p = device(p0, {n}, dtype());
  DTensor m(*acts_, {n}, DType::kF32, "m"), v(*acts_, {n}, DType::kF32, "v");
  DTensor master(*acts_, {n}, DType::kF32, "master");
  DTensor counter(*acts_, {16}, DType::kF32, "counter");
  zero(m), zero(v), zero(counter);
  const bool bf16 = dtype() == DType::kBF16;
  if (bf16) widen_to_f32(nullptr, dtype(), p.data(), master.as<float>(), n);
  auto* c = static_cast<AdamWCounter*>(counter.data());

  std::vector<float> want = p0, wm(p0.size(), 0), wv(p0.size(), 0);
  for (long t = 1; t <= 3; ++t) {
    // Gradients are f32 whatever the parameters' dtype; some tiny, some large.
    std::vector<float> g(static_cast<std::size_t>(n));
    cpu::Rng rng(100 + static_cast<std::uint64_t>(t));
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] = static_cast<float>(rng.uniform(-1, 1) * (i % 7 == 0 ? 1e-6 : 3.0));
    DTensor gd(*acts_, {n}, DType::kF32, "g");
    upload(gd, g);
    adamw_begin_step(nullptr, c, h.beta1, h.beta2, h.lr);
    adamw_update(nullptr, dtype(), p.data(), bf16 ? master.as<float>() : nullptr, gd.as<float>(),
                 m.as<float>(), v.as<float>(), n, h, c);
    cpu::adamw_update(want.data(), g.data(), wm.data(), wv.data(), want.size(),
                      {h.lr, h.weight_decay, h.beta1, h.beta2, h.eps, t});
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LE(rel_diff(download(m), wm), kF32Tol) << "m, step " << t;
    EXPECT_LE(rel_diff(download(v), wv), kF32Tol) << "v, step " << t;
    if (bf16) {
      EXPECT_LE(rel_diff(download(master), want), kF32Tol) << "master, step " << t;
      EXPECT_LE(rel_diff(download(p), rounded(want)), kBf16Tol) << "p, step " << t;
    } else {
      EXPECT_LE(rel_diff(download(p), want), kF32Tol) << "p, step " << t;
    }
  }
  // The update moved the parameters (a no-op kernel fails here) and the counter stepped on.
  EXPECT_GT(rel_diff(bf16 ? download(master) : download(p), p0), 1e-3);
  AdamWCounter host{};
  CUDA_CHECK(cudaMemcpy(&host, c, sizeof host, cudaMemcpyDeviceToHost));
  EXPECT_EQ(host.t, 3);
  EXPECT_FLOAT_EQ(host.step, static_cast<float>(h.lr / (1 - std::pow(h.beta1, 3.0))));
  EXPECT_FLOAT_EQ(host.root, static_cast<float>(std::sqrt(1 - std::pow(h.beta2, 3.0))));
}

TEST_P(Optimizers, SgdMatchesTheCpuKernel) {
  const std::int64_t n = 2500;
  const std::vector<float> p0 = random(n, 21);
  std::vector<float> g(static_cast<std::size_t>(n));
  cpu::Rng rng(22);
  for (float& x : g) x = static_cast<float>(rng.uniform(-2, 2));
  DTensor p = device(p0, {n}, dtype());
  DTensor gd(*acts_, {n}, DType::kF32, "g");
  DTensor master(*acts_, {n}, DType::kF32, "master");
  const bool bf16 = dtype() == DType::kBF16;
  if (bf16) widen_to_f32(nullptr, dtype(), p.data(), master.as<float>(), n);
  upload(gd, g);
  sgd_update(nullptr, dtype(), p.data(), bf16 ? master.as<float>() : nullptr, gd.as<float>(), n,
             0.05);
  std::vector<float> want = p0;
  cpu::sgd_update(want.data(), g.data(), want.size(), 0.05);
  const std::vector<float> got = download(p);
  if (bf16) {
    EXPECT_LE(rel_diff(download(master), want), kF32Tol);
    EXPECT_LE(rel_diff(got, rounded(want)), kBf16Tol);
  } else {
    EXPECT_LE(rel_diff(got, want), kF32Tol);
  }
  EXPECT_GT(rel_diff(got, p0), 1e-3);
}

// Updates far below half a bf16 ulp (1e-4, where half an ulp at 1.0 is 2^-8) add up on the f32
// master: after
// 100 steps the parameter has moved by 0.01, where stepping the bf16 value itself would leave it
// at 1.0 for ever.
TEST_P(Optimizers, SgdKeepsUpdatesSmallerThanTheDtypeResolves) {
  const std::int64_t n = 256;
  DTensor p = device(std::vector<float>(n, 1.0f), {n}, dtype());
  DTensor gd = device(std::vector<float>(n, 1.0f), {n}, DType::kF32);
  DTensor master(*acts_, {n}, DType::kF32, "master");
  const bool bf16 = dtype() == DType::kBF16;
  if (bf16) widen_to_f32(nullptr, dtype(), p.data(), master.as<float>(), n);
  for (int step = 0; step < 100; ++step)
    sgd_update(nullptr, dtype(), p.data(), bf16 ? master.as<float>() : nullptr, gd.as<float>(), n,
               1e-4);
  for (float x : download(p)) EXPECT_NEAR(x, 0.99, bf16 ? 4e-3 : 1e-5);
  if (bf16) {
    for (float x : download(master)) EXPECT_NEAR(x, 0.99, 1e-5);
  }
}

TEST_P(Optimizers, RefusesWhatItCannotStep) {
  DTensor p(*acts_, {4}, dtype(), "p");
  const AdamWHyper h{1e-3, 0, 0.9, 0.999, 1e-8};
  // Integer "parameters", and bf16 ones without their f32 master copy.
  EXPECT_THROW(sgd_update(nullptr, DType::kI32, p.data(), nullptr, nullptr, 4, 0.1), CudaError);
  if (dtype() == DType::kBF16) {
    EXPECT_THROW(adamw_update(nullptr, DType::kBF16, p.data(), nullptr, nullptr, nullptr, nullptr,
                              4, h, nullptr),
                 CudaError);
    EXPECT_THROW(sgd_update(nullptr, DType::kBF16, p.data(), nullptr, nullptr, 4, 0.1), CudaError);
  } else
    EXPECT_THROW(adamw_update(nullptr, DType::kI32, p.data(), nullptr, nullptr, nullptr, nullptr, 4,
                              h, nullptr),
                 CudaError);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Optimizers, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return dtype_name(i.param);
                         });

}  // namespace
}  // namespace ppbench::cuda::testing
