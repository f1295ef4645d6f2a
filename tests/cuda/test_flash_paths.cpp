// The FlashAttention-2 kernels (bf16, head_dim 64 and 128) against the general fused kernels on
// the same bf16 inputs: two independent implementations of one contract (attention_core.h) must
// agree on O, lse, dQ, dK and dV. A second opinion beside the layer tests against float64, and
// one that names the kernel at fault when the two paths disagree. Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <string>

#include "tests/cuda/gpu_test_util.h"
#include "workloads/cuda/flash_fa2_tiles.h"

namespace ppbench::cuda::testing {
namespace {

struct Shape4 {
  std::int64_t batch, heads, kv_heads, seq, head_dim;
};

// ||a - b|| / ||b||: both sides are bf16 computations with f32 accumulation, so they differ by
// roundings (P rounded to bf16 in different places), not by a model's conditioning.
double l2_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, s = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    s += double(b[i]) * b[i];
  }
  return a.size() == b.size() && s > 0 ? std::sqrt(d / s) : INFINITY;
}

// What the dispatch reads of the current device (flash_attention.cu's device_limits).
fa2::DeviceLimits current_device_limits() {
  int dev = 0, major = 0, optin = 0;
  EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
            cudaSuccess);
  return {major, static_cast<std::size_t>(optin)};
}

class FlashPaths : public GpuTest {
 protected:
  void compare(const Shape4& sh, std::uint64_t seed) {
    const Shape qs{sh.batch, sh.heads, sh.seq, sh.head_dim};
    const Shape ks{sh.batch, sh.kv_heads, sh.seq, sh.head_dim};
    const Shape rows{sh.batch, sh.heads, sh.seq};
    const DTensor q = device(random(shape_numel(qs), seed), qs, DType::kBF16);
    const DTensor k = device(random(shape_numel(ks), seed + 1), ks, DType::kBF16);
    const DTensor v = device(random(shape_numel(ks), seed + 2), ks, DType::kBF16);
    const std::vector<float> dov = random(shape_numel(qs), seed + 3);
    const DTensor d_o = device(dov, qs, DType::kBF16);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
    // The automatic path must be the FlashAttention-2 one here, or the two runs below would
    // compare the general kernels with themselves.
    const fa2::DeviceLimits limits = current_device_limits();
    ASSERT_TRUE(fa2::forward_applies(true, static_cast<int>(sh.head_dim), sh.seq,
                                     sh.batch * sh.heads, scale, limits));
    ASSERT_TRUE(fa2::backward_applies(true, static_cast<int>(sh.head_dim), sh.seq,
                                      sh.batch * sh.kv_heads, limits));

    struct Out {
      std::vector<float> o, lse, dq, dk, dv;
    };
    auto run = [&](FlashPath path) {
      Out r;
      const DTensor o(*acts_, qs, DType::kBF16, "test o");
      const DTensor lse(*acts_, rows, DType::kF32, "test lse");
      flash_attention_forward(*ctx_, q, k, v, o, lse, scale, path);
      r.o = download(o);
      r.lse = download(lse);
      // delta = rowsum(dO * O) of this path's own O, as the layer computes it.
      std::vector<float> delta(static_cast<std::size_t>(shape_numel(rows)));
      for (std::size_t row = 0; row < delta.size(); ++row) {
        double s = 0;
        for (std::int64_t c = 0; c < sh.head_dim; ++c) {
          const std::size_t i = row * static_cast<std::size_t>(sh.head_dim) + c;
          s += double(dov[i]) * r.o[i];
        }
        delta[row] = static_cast<float>(s);
      }
      const DTensor dl = device(delta, rows, DType::kF32);
      const DTensor dq(*acts_, qs, DType::kBF16, "test dq"), dk(*acts_, ks, DType::kBF16, "dk"),
          dv(*acts_, ks, DType::kBF16, "dv");
      flash_attention_backward(*ctx_, q, k, v, d_o, lse, dl, dq, dk, dv, scale, path);
      r.dq = download(dq);
      r.dk = download(dk);
      r.dv = download(dv);
      return r;
    };
    const Out general = run(FlashPath::kGeneral);
    const Out fast = run(FlashPath::kAuto);
    const std::string at = "B=" + std::to_string(sh.batch) + " H=" + std::to_string(sh.heads) +
                           " Hkv=" + std::to_string(sh.kv_heads) + " S=" + std::to_string(sh.seq) +
                           " D=" + std::to_string(sh.head_dim);
    for (float x : fast.o) ASSERT_TRUE(std::isfinite(x)) << at << ": O not finite";
    EXPECT_LE(l2_rel(fast.o, general.o), kTolerance) << at << ": O";
    double lse_diff = 0;  // lse is f32 on both paths: absolute, in units of the log; a NaN fails
    for (std::size_t i = 0; i < general.lse.size(); ++i) {
      const double d = std::abs(double(fast.lse[i]) - general.lse[i]);
      if (std::isnan(d)) {  // kept: a later finite difference must not replace it
        lse_diff = d;
        break;
      }
      lse_diff = std::max(lse_diff, d);
    }
    EXPECT_LE(lse_diff, 1e-3) << at << ": lse";
    EXPECT_LE(l2_rel(fast.dq, general.dq), kTolerance) << at << ": dQ";
    EXPECT_LE(l2_rel(fast.dk, general.dk), kTolerance) << at << ": dK";
    EXPECT_LE(l2_rel(fast.dv, general.dv), kTolerance) << at << ": dV";
  }
  static constexpr double kTolerance = 1e-2;
};

TEST_P(FlashPaths, Flash2AgreesWithTheGeneralKernels) {
  if (flash_path_from_environment() == FlashPath::kGeneral)
    GTEST_SKIP() << "PPBENCH_FLASH=general switches the FlashAttention-2 kernels off";
  // Tails inside a 64-query tile and a 128-key block, GQA groups of 4 and 2, a second batch
  // entry, a sequence shorter than one tile, and Llama's head count at a modest length.
  compare({1, 8, 2, 200, 64}, 31);
  compare({2, 4, 2, 300, 128}, 32);
  compare({1, 2, 1, 37, 128}, 33);
  compare({1, 32, 8, 512, 128}, 34);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FlashPaths, ::testing::Values(DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return dtype_name(i.param);
                         });

}  // namespace
}  // namespace ppbench::cuda::testing
