// Host-side tests of the CUDA backend: they need no GPU and always run (arena bookkeeping, shape
// handling, error formatting, bf16 rounding, the device query's no-GPU answer).
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "workloads/cuda/kernels.h"

namespace ppbench::cuda {
namespace {

TEST(ArenaPlan, AlignsAndCountsInUseAndPeak) {
  ArenaPlan plan(4096);
  const std::size_t a = plan.allocate(10);
  const std::size_t b = plan.allocate(300);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 256u);
  EXPECT_EQ(plan.in_use(), 256u + 512u);
  plan.free(a);
  EXPECT_EQ(plan.in_use(), 512u);
  EXPECT_EQ(plan.peak(), 768u);
  plan.reset_peak();
  EXPECT_EQ(plan.peak(), 512u);
}

TEST(ArenaPlan, FirstFitReusesFreedHolesAndCoalesces) {
  ArenaPlan plan(1024);
  const std::size_t a = plan.allocate(256), b = plan.allocate(256), c = plan.allocate(256);
  EXPECT_EQ(plan.allocate(512), ArenaPlan::kNone);  // 256 left
  plan.free(b);
  EXPECT_EQ(plan.allocate(256), b);  // the hole is reused
  plan.free(a);
  plan.free(b);  // a and b coalesce into 512 at offset 0
  EXPECT_EQ(plan.largest_free(), 512u);
  EXPECT_EQ(plan.allocate(512), 0u);
  plan.free(0);
  plan.free(c);  // everything coalesces back into one block
  EXPECT_EQ(plan.largest_free(), 1024u);
  EXPECT_EQ(plan.in_use(), 0u);
  EXPECT_EQ(plan.blocks(), 0u);
}

TEST(ArenaPlan, DoubleFreeIsAnError) {
  ArenaPlan plan(1024);
  const std::size_t a = plan.allocate(1);
  plan.free(a);
  EXPECT_THROW(plan.free(a), std::invalid_argument);
}

// An arena over a fake base address: tensors can be made and counted without any device memory
// as long as no kernel touches them.
TEST(DeviceArena, OutOfMemoryNamesScopeWhatAndBytes) {
  DeviceArena arena = DeviceArena::over(reinterpret_cast<void*>(0x10000), 1 << 20, "rank 3");
  arena.set_scope("stage 7 F mb 2");
  DTensor fits(arena, {256, 256}, DType::kBF16, "activations");  // 128 KiB
  EXPECT_EQ(arena.in_use(), 131072u);
  try {
    DTensor big(arena, {1024, 1024}, DType::kF32, "attention scores");
    FAIL() << "expected an out-of-memory error";
  } catch (const ppbench::OutOfMemory& e) {  // the machine's limit: exit code 3
    EXPECT_NE(dynamic_cast<const ArenaOutOfMemory*>(&e), nullptr);
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
    EXPECT_NE(m.find("stage 7 F mb 2"), std::string::npos) << m;
    EXPECT_NE(m.find("attention scores"), std::string::npos) << m;
    EXPECT_NE(m.find("4194304 bytes"), std::string::npos) << m;
  }
  EXPECT_EQ(arena.in_use(), 131072u);  // the failed request took nothing
}

TEST(DeviceArena, SharedTensorsFreeOnLastReferenceAndSavedCountsHeldBytes) {
  DeviceArena arena = DeviceArena::over(reinterpret_cast<void*>(0x10000), 1 << 20, "rank 0");
  Saved saved;
  {
    DTensor x(arena, {4, 8}, DType::kF32, "x");
    saved.t.push_back(x);  // a reference, not a copy
    EXPECT_EQ(arena.in_use(), 256u);
    EXPECT_EQ(saved.bytes(), 4 * 8 * 4);
  }
  EXPECT_EQ(arena.in_use(), 256u);  // still held by `saved`
  saved.sub.emplace_back();
  saved.sub[0].t.emplace_back(arena, Shape{3}, DType::kBF16, "y");
  EXPECT_EQ(saved.bytes(), 128 + 6);
  saved.t[0].release();
  EXPECT_EQ(saved.t[0].shape(), (Shape{4, 8}));  // shape kept, bytes gone
  EXPECT_EQ(saved.bytes(), 6);
  saved.clear();
  EXPECT_EQ(arena.in_use(), 0u);
  EXPECT_EQ(arena.peak(), 512u);
}

TEST(DTensor, ShapesRowsColsAndReshape) {
  DeviceArena arena = DeviceArena::over(reinterpret_cast<void*>(0x10000), 1 << 16, "t");
  DTensor x(arena, {2, 3, 5}, DType::kBF16, "x");
  EXPECT_EQ(x.numel(), 30);
  EXPECT_EQ(x.rows(), 6);
  EXPECT_EQ(x.cols(), 5);
  EXPECT_EQ(x.dim(-1), 5);
  EXPECT_EQ(x.bytes(), 60);
  DTensor y = x.reshaped({6, 5});
  EXPECT_EQ(y.data(), x.data());
  EXPECT_THROW(x.reshaped({7, 5}), std::invalid_argument);
  EXPECT_EQ(shape_text({2, 3, 5}), "[2, 3, 5]");
  DTensor ids = DTensor::shape_only({2, 3}, DType::kI32);
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(ids.bytes(), 0);
}

TEST(CheckMacros, FormatCarriesFileLineCallAndLibraryText) {
  EXPECT_EQ(
      format_error("a.cu", 12, "cudaMalloc(&p, n)", "cudaErrorMemoryAllocation", "out of memory"),
      "a.cu:12: cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of memory)");
  try {
    CUDA_CHECK(cudaErrorInvalidValue);
    FAIL();
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("test_host.cpp:"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaErrorInvalidValue"), std::string::npos) << m;
  }
  try {
    CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(CUDA_CHECK(cudaSuccess));
}

// The fused kernels index every tensor by q's and k's sizes: a tensor of another shape or dtype is
// refused, by name, before any launch.
TEST(FusedAttentionShapes, EveryTensorIsCheckedAgainstQKAndV) {
  const Shape qs{2, 8, 16, 64}, ks{2, 2, 16, 64}, rows{2, 8, 16};
  const DTensor q = DTensor::shape_only(qs, DType::kBF16);
  const DTensor k = DTensor::shape_only(ks, DType::kBF16), v = k;
  const DTensor o = q, lse = DTensor::shape_only(rows, DType::kF32);
  const auto refusal = [](auto pass) -> std::string {
    try {
      pass();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refusal([&] { check_flash_forward(q, k, v, o, lse); }), "accepted");
  EXPECT_EQ(refusal([&] { check_flash_backward(q, k, v, q, lse, lse, q, k, v); }), "accepted");

  const DTensor flat = DTensor::shape_only({2 * 8 * 16}, DType::kF32);
  const DTensor lse_bf16 = DTensor::shape_only(rows, DType::kBF16);
  const DTensor k_f32 = DTensor::shape_only(ks, DType::kF32);
  EXPECT_NE(refusal([&] { check_flash_forward(q, k, v, o, flat); }).find("lse must be [2, 8, 16]"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_flash_forward(q, k, v, o, lse_bf16); }).find("got [2, 8, 16] bf16"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_flash_forward(q, k, v, k, lse); }).find("o must be"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_flash_forward(q, k_f32, k_f32, o, lse); }).find("share a dtype"),
            std::string::npos);
  EXPECT_NE(
      refusal([&] { check_flash_backward(q, k, v, q, lse, flat, q, k, v); }).find("delta must be"),
      std::string::npos);
  EXPECT_NE(
      refusal([&] { check_flash_backward(q, k, v, q, lse, lse, q, q, v); }).find("dk must be"),
      std::string::npos);
  EXPECT_NE(refusal([&] {
              check_flash_backward(q, k, v, q, lse, lse, q, k, k_f32);
            }).find("dv must be [2, 2, 16, 64] bf16"),
            std::string::npos);
  EXPECT_NE(
      refusal([&] { check_flash_backward(q, k, v, k, lse, lse, q, k, v); }).find("dO must be"),
      std::string::npos);
}

// Memory running out is the machine's limit (exit code 3); any other failure is not.
TEST(CheckMacros, OutOfMemoryIsTheMachinesLimit) {
  EXPECT_THROW(CUDA_CHECK(cudaErrorMemoryAllocation), DeviceOutOfMemory);
  EXPECT_THROW(CUBLAS_CHECK(CUBLAS_STATUS_ALLOC_FAILED), DeviceOutOfMemory);
  try {
    CUDA_CHECK(cudaErrorMemoryAllocation);
  } catch (const ppbench::EnvironmentError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation"), std::string::npos)
        << e.what();
  }
  try {
    CUDA_CHECK(cudaErrorLaunchFailure);
  } catch (const ppbench::EnvironmentError& e) {
    ADD_FAILURE() << "not a memory error: " << e.what();
  } catch (const CudaError&) {
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  // bf16 steps by 1/128 at 1.0: 1/256 above a value is a tie.
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 256), 1.0f);               // tie -> even (down)
  EXPECT_EQ(round_to_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // tie -> even (up)
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 512), 1.0f);               // below half a step
  EXPECT_EQ(round_to_bf16(1.0f + 3.0f / 512), 1.0f + 2.0f / 256);  // above half a step
  EXPECT_EQ(round_to_bf16(-2.5f), -2.5f);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_name(DType::kF32), "f32");
}

TEST(DeviceInfo, AnswersWithOrWithoutAGpu) {
  std::string why;
  const bool gpu = has_gpu(&why);
  const std::string text = device_info_text();
  if (gpu) {
    EXPECT_NE(text.find("GPU 0:"), std::string::npos) << text;
  } else {
    EXPECT_FALSE(why.empty());
    EXPECT_NE(text.find("no GPU visible ("), std::string::npos) << text;
  }
  EXPECT_NE(text.find("CUDA runtime"), std::string::npos) << text;
}

// The fused attention picks its tiles from the shared memory a block may have; H100/H200 allow
// 227 KiB (232448 bytes) per block, older parts 48 KiB without opting in.
TEST(FlashTiles, LargestTilesThatFit) {
  constexpr std::size_t kHopper = 232448;
  const FlashTiles f = flash_forward_tiles(128, 2, kHopper);
  EXPECT_EQ(f.query_rows, 64);
  EXPECT_EQ(f.key_rows, 64);
  EXPECT_LE(f.shared_bytes, kHopper);
  EXPECT_GT(f.shared_bytes, std::size_t{64} * 128 * 2 * 3);  // at least Q, K, V tiles in bf16

  const FlashTiles b = flash_backward_tiles(128, 2, kHopper);
  EXPECT_GT(b.query_rows, 0);
  EXPECT_LE(b.shared_bytes, kHopper);
  // f32 tiles are twice the bytes: the same head_dim gets tiles no larger.
  const FlashTiles b32 = flash_backward_tiles(128, 4, kHopper);
  EXPECT_GT(b32.query_rows, 0);
  EXPECT_LE(b32.query_rows * b32.key_rows, b.query_rows * b.key_rows);
  // Odd head_dim is padded to a multiple of 16, never rejected for being odd.
  EXPECT_GT(flash_forward_tiles(6, 4, 48 * 1024).query_rows, 0);
  // Within 48 KiB a head_dim of 128 needs smaller tiles; a huge head_dim fits none.
  const FlashTiles small = flash_forward_tiles(128, 2, 48 * 1024);
  EXPECT_GT(small.query_rows, 0);
  EXPECT_LT(small.query_rows, 64);
  EXPECT_EQ(flash_forward_tiles(4096, 4, kHopper).query_rows, 0);
  EXPECT_EQ(flash_backward_tiles(4096, 4, kHopper).shared_bytes, 0u);
}

TEST(AttentionNote, SaysWhichKernelIsBuilt) {
  EXPECT_NE(std::string(kAttentionNote).find("fused"), std::string::npos);
  EXPECT_STREQ(attention_kernel_name(AttentionKernel::kFused), "fused");
  EXPECT_STREQ(attention_kernel_name(AttentionKernel::kMaterialised), "materialised");
}

}  // namespace
}  // namespace ppbench::cuda
