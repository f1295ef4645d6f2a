// The instructions of workloads/cuda/flash_fa2_ptx.cuh, and the CUDA built-ins the
// FlashAttention-2 kernels use, executed on the host by simt.h's emulated warps, so that the
// kernels' own source (flash_fa2_{forward,backward}_kernel.cuh) compiles with the host compiler
// and runs without a GPU. Include this before the kernel headers, in one translation unit only.
//
// mma.sync and ldmatrix follow the PTX ISA's lane tables (ptx_tables.h), not the kernels' own
// fragment maps, so a kernel that composes those maps wrongly computes a wrong result here too.
// cp.async copies happen when the thread waits for their group, as on the GPU, so a tile read
// before its wait and barrier holds stale data; shared memory starts each block filled with
// 0xFF bytes (NaN as bf16 and f32), so a read of what no thread wrote shows up as NaN.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "tests/simt/ptx_tables.h"
#include "tests/simt/simt.h"
#include "workloads/cuda/dtype.h"

// The kernels' CUDA spelling, for the host compiler.
#define PPBENCH_FA2_EMULATED 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)
#define threadIdx (::ppbench::simt::thread_idx())
#define blockIdx (::ppbench::simt::block_idx())
#define blockDim (::ppbench::simt::block_dim())
#define __syncthreads() ::ppbench::simt::sync_threads()

struct float2 {
  float x, y;
};

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  if (mask != 0xffffffffu) throw ppbench::simt::SimtError("__shfl_xor_sync with a partial mask");
  return ppbench::simt::warp_collective<T>("shfl.sync.bfly", value,
                                           [lane_mask](const auto& in, const auto& out) {
                                             for (int l = 0; l < ppbench::simt::kWarpSize; ++l)
                                               *out[l] = *in[l ^ lane_mask];
                                           });
}

// One OS thread runs every fiber, and a fiber yields only at a barrier or warp-wide instruction:
// a read-modify-write is atomic here as it stands.
inline float atomicAdd(float* p, float v) {
  const float old = *p;
  *p = old + v;
  return old;
}

namespace ppbench::cuda::fa2 {

// The kernels only move bf16 values and hand them to the instructions below, which convert.
struct bf16 {
  std::uint16_t bits;
};

// Round to nearest even and back, bit for bit as the GPU's conversions (workloads/cuda/dtype.h).
inline std::uint16_t bf16_bits_rn(float f) { return float_to_bf16_bits(f); }
inline float bf16_value(std::uint16_t bits) { return bf16_bits_to_float(bits); }
inline float low_half(std::uint32_t r) { return bf16_value(static_cast<std::uint16_t>(r)); }
inline float high_half(std::uint32_t r) { return bf16_value(static_cast<std::uint16_t>(r >> 16)); }

// The dynamic shared memory the kernels declare (`extern __shared__ ... smem[]`), 227 KiB as on
// an H100; simt::launch's before_block refills it (fill_shared).
inline constexpr std::size_t kSharedCapacity = 227 * 1024;
alignas(128) inline unsigned char smem[kSharedCapacity];
inline void fill_shared() { std::memset(smem, 0xFF, sizeof smem); }

// The dynamic shared memory the launch asked for (its sharedMem bytes): an access past it faults on
// a GPU even where the array above would hold it. The tests set it for each launch.
inline std::size_t shared_launched = kSharedCapacity;

inline unsigned char* shared_at(std::uint32_t addr, std::size_t bytes, const char* what) {
  if (std::size_t{addr} + bytes > shared_launched)
    throw simt::SimtError(std::string(what) + ": shared address " + std::to_string(addr) + " + " +
                          std::to_string(bytes) + " bytes is past the " +
                          std::to_string(shared_launched) + " bytes the launch asked for");
  return smem + addr;
}

inline std::uint32_t smem_u32(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  if (c < smem || c >= smem + kSharedCapacity)
    throw simt::SimtError("smem_u32: a pointer outside the shared memory");
  return static_cast<std::uint32_t>(c - smem);
}

// D += A B over the 32 lanes' fragments, f32 accumulation as the tensor cores do it.
inline void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                     std::uint32_t b1) {
  struct In {
    float c[4];
    std::uint32_t a[4], b[2];
  };
  struct Out {
    float d[4];
  };
  const In in{{d[0], d[1], d[2], d[3]}, {a[0], a[1], a[2], a[3]}, {b0, b1}};
  const Out out = simt::warp_collective<Out>(
      "mma.sync.m16n8k16.bf16", in, [](const auto& ins, const auto& outs) {
        float am[16][16], bm[16][8], cm[16][8];
        for (int l = 0; l < simt::kWarpSize; ++l) {
          for (int i = 0; i < 8; ++i) {
            const std::uint32_t r = ins[l]->a[i / 2];
            am[frag::ptx_a(l, i).row][frag::ptx_a(l, i).col] = i % 2 ? high_half(r) : low_half(r);
          }
          for (int i = 0; i < 4; ++i) {
            const std::uint32_t r = ins[l]->b[i / 2];
            bm[frag::ptx_b(l, i).row][frag::ptx_b(l, i).col] = i % 2 ? high_half(r) : low_half(r);
          }
          for (int i = 0; i < 4; ++i)
            cm[frag::ptx_c(l, i).row][frag::ptx_c(l, i).col] = ins[l]->c[i];
        }
        for (int l = 0; l < simt::kWarpSize; ++l)
          for (int i = 0; i < 4; ++i) {
            const frag::Coord x = frag::ptx_c(l, i);
            float s = 0.0f;  // bf16 x bf16 products are exact in f32
            for (int k = 0; k < 16; ++k) s += am[x.row][k] * bm[k][x.col];
            outs[l]->d[i] = cm[x.row][x.col] + s;
          }
      });
  for (int i = 0; i < 4; ++i) d[i] = out.d[i];
}

// ldmatrix .m8n8.x4 (.trans): lanes 8m .. 8m + 7 give the rows of matrix m (16 bytes each).
inline void ldsm_emulated(std::uint32_t (&r)[4], std::uint32_t addr, bool trans) {
  struct Out {
    std::uint32_t r[4];
  };
  const Out out = simt::warp_collective<Out>(
      trans ? "ldmatrix.x4.trans" : "ldmatrix.x4", addr,
      [trans](const auto& ins, const auto& outs) {
        for (int l = 0; l < simt::kWarpSize; ++l)
          if (*ins[l] % 16 != 0)
            throw simt::SimtError("ldmatrix: lane " + std::to_string(l) + "'s row address " +
                                  std::to_string(*ins[l]) + " is not 16-byte aligned");
        for (int l = 0; l < simt::kWarpSize; ++l)
          for (int m = 0; m < 4; ++m) {
            std::uint16_t half[2];
            for (int h = 0; h < 2; ++h) {
              const frag::Coord x = frag::ptx_ldsm(l, h, trans);  // as stored
              const unsigned char* row = shared_at(*ins[8 * m + x.row], 16, "ldmatrix");
              std::memcpy(&half[h], row + 2 * x.col, 2);
            }
            outs[l]->r[m] = std::uint32_t{half[0]} | (std::uint32_t{half[1]} << 16);
          }
      });
  for (int m = 0; m < 4; ++m) r[m] = out.r[m];
}
inline void ldsm_x4(std::uint32_t (&r)[4], std::uint32_t addr) { ldsm_emulated(r, addr, false); }
inline void ldsm_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  ldsm_emulated(r, addr, true);
}

// cp.async: each thread's copies wait in groups until cp_async_wait lets them land.
struct PendingCopy {
  std::uint32_t dst;
  const void* src;
  int bytes;
  bool valid;
};
struct CopyGroups {
  std::vector<PendingCopy> open;
  std::deque<std::vector<PendingCopy>> committed;
};
// Per thread of the block being run (indexed by threadIdx.x), reset by fill_shared's caller.
inline std::vector<CopyGroups> g_copies;
inline CopyGroups& my_copies() {
  const unsigned t = simt::thread_idx().x;
  if (g_copies.size() <= t) g_copies.resize(t + 1);
  return g_copies[t];
}
inline void cp_async(std::uint32_t dst, const void* src, int bytes, bool valid) {
  if (dst % static_cast<std::uint32_t>(bytes) != 0 ||
      reinterpret_cast<std::uintptr_t>(src) % static_cast<std::uintptr_t>(bytes) != 0)
    throw simt::SimtError("cp.async of " + std::to_string(bytes) + " bytes: misaligned address");
  shared_at(dst, static_cast<std::size_t>(bytes), "cp.async");
  my_copies().open.push_back({dst, src, bytes, valid});
}
inline void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  cp_async(dst, src, 16, valid);
}
inline void cp_async_4(std::uint32_t dst, const void* src, bool valid) {
  cp_async(dst, src, 4, valid);
}
inline void cp_async_commit() {
  CopyGroups& c = my_copies();
  c.committed.push_back(std::move(c.open));
  c.open.clear();
}
template <int kPending>
void cp_async_wait() {
  CopyGroups& c = my_copies();
  while (c.committed.size() > static_cast<std::size_t>(kPending)) {
    for (const PendingCopy& p : c.committed.front()) {
      unsigned char* to = shared_at(p.dst, static_cast<std::size_t>(p.bytes), "cp.async");
      if (p.valid)
        std::memcpy(to, p.src, static_cast<std::size_t>(p.bytes));
      else
        std::memset(to, 0, static_cast<std::size_t>(p.bytes));  // src-size 0: zero-fill
    }
    c.committed.pop_front();
  }
}
inline void reset_copies() { g_copies.clear(); }

// ex2.approx.ftz: results below 2^-126 flush to zero.
inline float exp2_ftz(float x) {
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

inline std::uint32_t pack_bf16(float lo, float hi) {
  return std::uint32_t{bf16_bits_rn(lo)} | (std::uint32_t{bf16_bits_rn(hi)} << 16);
}

using ::fmaf;
using ::fmaxf;
using ::logf;
inline int min(int a, int b) { return std::min(a, b); }

}  // namespace ppbench::cuda::fa2
