// Shared by the GPU tests: a fixture that skips without a GPU, host <-> device helpers, parameter
// copies between the GPU layers (W [out, in], bf16 or f32) and the CPU float64 layers (W [in,
// out]), and the norm-wise relative error max|a - b| / max|b| of the CPU kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

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

// Linear weights are stored transposed on the GPU; embeddings and vectors are not.
inline bool transposed(const std::string& name, const Shape& s) {
  return s.size() == 2 && name != "embedding";
}
inline std::vector<float> to_cpu_layout(const std::vector<float>& v, const std::string& name,
                                        const Shape& s) {
  if (!transposed(name, s)) return v;
  std::vector<float> t(v.size());
  for (std::int64_t r = 0; r < s[0]; ++r)
    for (std::int64_t c = 0; c < s[1]; ++c)
      t[static_cast<std::size_t>(c * s[0] + r)] = v[static_cast<std::size_t>(r * s[1] + c)];
  return t;
}

// The CPU layer gets exactly the GPU layer's (rounded) parameters.
inline void copy_params(Layer& g, cpu::Layer<double>& c) {
  std::vector<Param*> gp = g.params();
  std::vector<cpu::Param<double>*> cp = c.params();
  ASSERT_EQ(gp.size(), cp.size());
  for (std::size_t i = 0; i < gp.size(); ++i) {
    std::vector<float> v = to_cpu_layout(download(gp[i]->value), gp[i]->name, gp[i]->value.shape());
    ASSERT_EQ(static_cast<std::int64_t>(v.size()), cp[i]->value.numel()) << gp[i]->name;
    for (std::size_t j = 0; j < v.size(); ++j) cp[i]->value.data[j] = v[j];
  }
}

}  // namespace ppbench::cuda::testing
