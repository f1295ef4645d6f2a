// The fused attention core (attention_core.h), in the FlashAttention-2 arrangement:
//
// Forward: a block owns `br` query rows of one head and streams the key/value tiles of its kv
// head through shared memory, only those at or before its last query (the causal mask makes the
// rest zero). Per tile: S = Q K^T, an online softmax (running max m and sum l per row; the
// accumulated O is rescaled by exp(m_old - m_new) when the max grows), O += P V. At the end
// O /= l and the row's log-sum-exp m + log(l) is written for the backward.
//
// Backward: a block owns `bc` keys of one kv head, keeps K, V and the f32 accumulators dK, dV in
// shared memory, and walks every query tile at or after its first key, for each query head of
// the group (so GQA's sum over the group needs no atomics for dK and dV). Per tile it recomputes
// P = exp(S * scale - lse), then dV += P^T dO, dP = dO V^T, dS = P (dP - delta) * scale,
// dK += dS^T Q, and adds dS K into an f32 dQ with atomics (several key blocks share a query).
//
// Tile products run in shared memory through TileMma: tensor cores (WMMA, 16x16x16, f32
// accumulation) for bf16, plain FMA loops for f32, whose tolerance (1e-4 against float64) rules
// out TF32. Shared arrays are padded (head_dim to a multiple of 16, rows by 8 elements) so every
// WMMA pointer is 32-byte aligned and rows do not fall on the same banks.
//
// These kernels are the general path: any head_dim, bf16 and f32. bf16 at head_dim 64 or 128
// (Llama's and most models') goes to the FlashAttention-2 kernels of flash_fa2_*.cu instead,
// which keep Q, S, P, O (forward) and dK, dV, S, dP (backward) in mma.sync fragments in registers
// rather than in shared memory (where these kernels' WMMA tiles reach about 33 TFLOP/s at Llama's
// shape on an H100, a tenth of cuDNN); flash_attention_forward and flash_attention_backward choose
// between the two per call (fa2::forward_applies and fa2::backward_applies in flash_fa2_tiles.h).
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "workloads/cuda/attention_core.h"
#include "workloads/cuda/flash_fa2.h"
#include "workloads/cuda/flash_fa2_tiles.h"
#include "workloads/cuda/kernel_util.cuh"

namespace ppbench::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;

__host__ __device__ constexpr int round_up(int x, int m) { return (x + m - 1) / m * m; }

// Hands out 128-byte aligned byte offsets into one dynamic shared-memory buffer.
struct Carve {
  std::size_t at = 0;
  __host__ __device__ std::size_t take(std::size_t bytes) {
    at = (at + 127) / 128 * 128;
    const std::size_t o = at;
    at += bytes;
    return o;
  }
};

// Leading dimensions shared by both kernels: `t` for tiles in the layer dtype with head_dim
// columns, `f` for f32 tiles with head_dim columns, `s` for f32 score tiles, `p` for score tiles
// in the layer dtype.
struct Strides {
  int dp, t, f, s, p;
  __host__ __device__ Strides(int head_dim, int key_rows)
      : dp(round_up(head_dim, 16)), t(dp + 8), f(dp + 4), s(key_rows + 4), p(key_rows + 8) {}
};

struct ForwardLayout {
  std::size_t q, k, v, s, p, o, m, l, bytes;
};
__host__ __device__ inline ForwardLayout forward_layout(int br, int bc, int head_dim, int elem) {
  const Strides ld(head_dim, bc);
  Carve c;
  ForwardLayout L{};
  L.q = c.take(std::size_t(br) * ld.t * elem);
  L.k = c.take(std::size_t(bc) * ld.t * elem);
  L.v = c.take(std::size_t(bc) * ld.t * elem);
  L.s = c.take(std::size_t(br) * ld.s * 4);
  L.p = c.take(std::size_t(br) * ld.p * elem);
  L.o = c.take(std::size_t(br) * ld.f * 4);
  L.m = c.take(std::size_t(br) * 4);
  L.l = c.take(std::size_t(br) * 4);
  L.bytes = c.at;
  return L;
}

struct BackwardLayout {
  std::size_t k, v, dk, dv, q, dout, s, dp, p, ds, dq, lse, delta, bytes;
};
__host__ __device__ inline BackwardLayout backward_layout(int br, int bc, int head_dim, int elem) {
  const Strides ld(head_dim, bc);
  Carve c;
  BackwardLayout L{};
  L.k = c.take(std::size_t(bc) * ld.t * elem);
  L.v = c.take(std::size_t(bc) * ld.t * elem);
  L.dk = c.take(std::size_t(bc) * ld.f * 4);
  L.dv = c.take(std::size_t(bc) * ld.f * 4);
  L.q = c.take(std::size_t(br) * ld.t * elem);
  L.dout = c.take(std::size_t(br) * ld.t * elem);
  L.s = c.take(std::size_t(br) * ld.s * 4);
  L.dp = c.take(std::size_t(br) * ld.s * 4);
  L.p = c.take(std::size_t(br) * ld.p * elem);
  L.ds = c.take(std::size_t(br) * ld.p * elem);
  L.dq = c.take(std::size_t(br) * ld.f * 4);
  L.lse = c.take(std::size_t(br) * 4);
  L.delta = c.take(std::size_t(br) * 4);
  L.bytes = c.at;
  return L;
}

// C[m x n] (f32, ldc) = or += op(A)[m x k] op(B)[k x n], everything in shared memory; m, n, k are
// multiples of 16. op(A) is A stored row-major [m x k] (lda), or with kTransA A stored [k x m];
// op(B) is B stored [k x n] (ldb), or with kTransB B stored [n x k]. The caller synchronises.
template <typename T, bool kTransA, bool kTransB>
struct TileMma;

template <bool kTransA, bool kTransB>
struct TileMma<bf16, kTransA, kTransB> {
  __device__ static void run(float* c, int ldc, const bf16* a, int lda, const bf16* b, int ldb,
                             int m, int n, int k, bool accumulate) {
    namespace wmma = nvcuda::wmma;
    using LayoutA = std::conditional_t<kTransA, wmma::col_major, wmma::row_major>;
    using LayoutB = std::conditional_t<kTransB, wmma::col_major, wmma::row_major>;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int tiles_n = n / 16, tiles = (m / 16) * tiles_n;
    for (int t = warp; t < tiles; t += kWarps) {  // one warp per 16 x 16 tile of C
      const int tm = t / tiles_n * 16, tn = t % tiles_n * 16;
      float* ct = c + tm * ldc + tn;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      if (accumulate) {
        wmma::load_matrix_sync(acc, ct, ldc, wmma::mem_row_major);
      } else {
        wmma::fill_fragment(acc, 0.0f);
      }
      for (int kk = 0; kk < k; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, LayoutA> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LayoutB> fb;
        // A transposed in storage is op(A) column-major with the same leading dimension.
        wmma::load_matrix_sync(fa, kTransA ? a + kk * lda + tm : a + tm * lda + kk, lda);
        wmma::load_matrix_sync(fb, kTransB ? b + tn * ldb + kk : b + kk * ldb + tn, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(ct, acc, ldc, wmma::mem_row_major);
    }
  }
};

template <bool kTransA, bool kTransB>
struct TileMma<float, kTransA, kTransB> {
  __device__ static void run(float* c, int ldc, const float* a, int lda, const float* b, int ldb,
                             int m, int n, int k, bool accumulate) {
    for (int idx = static_cast<int>(threadIdx.x); idx < m * n; idx += kThreads) {
      const int i = idx / n, j = idx % n;
      float s = accumulate ? c[i * ldc + j] : 0.0f;
      for (int kk = 0; kk < k; ++kk) {
        const float x = kTransA ? a[kk * lda + i] : a[i * lda + kk];
        const float y = kTransB ? b[j * ldb + kk] : b[kk * ldb + j];
        s = fmaf(x, y, s);
      }
      c[i * ldc + j] = s;
    }
  }
};

// Rows row0 .. row0 + rows of a [S, D] matrix into a [rows, dp] shared tile (leading dimension
// ld), zero beyond S and beyond D. 16-byte vector loads when a row is a whole number of them.
template <typename T>
__device__ void load_rows(T* dst, int ld, const T* __restrict__ src, int row0, int rows, int seq,
                          int d, int dp) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  if (d % kVec == 0) {
    const int per_row = dp / kVec;
    for (int idx = static_cast<int>(threadIdx.x); idx < rows * per_row; idx += kThreads) {
      const int r = idx / per_row, c = idx % per_row * kVec;
      const int s = row0 + r;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (s < seq && c < d) val = *reinterpret_cast<const uint4*>(src + std::int64_t{s} * d + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = val;
    }
    return;
  }
  for (int idx = static_cast<int>(threadIdx.x); idx < rows * dp; idx += kThreads) {
    const int r = idx / dp, c = idx % dp;
    const int s = row0 + r;
    dst[r * ld + c] = (s < seq && c < d) ? src[std::int64_t{s} * d + c] : from_f<T>(0.0f);
  }
}

struct Dims {
  int heads, kv_heads, seq, head_dim;
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                         T* __restrict__ o, float* __restrict__ lse, Dims dims, int br, int bc,
                         float scale) {
  extern __shared__ __align__(128) unsigned char smem[];
  const ForwardLayout L = forward_layout(br, bc, dims.head_dim, sizeof(T));
  const Strides ld(dims.head_dim, bc);
  T* qs = reinterpret_cast<T*>(smem + L.q);
  T* ks = reinterpret_cast<T*>(smem + L.k);
  T* vs = reinterpret_cast<T*>(smem + L.v);
  float* ss = reinterpret_cast<float*>(smem + L.s);
  T* ps = reinterpret_cast<T*>(smem + L.p);
  float* os = reinterpret_cast<float*>(smem + L.o);
  float* m_row = reinterpret_cast<float*>(smem + L.m);
  float* l_row = reinterpret_cast<float*>(smem + L.l);

  const int seq = dims.seq, d = dims.head_dim;
  const int bh = static_cast<int>(blockIdx.y);
  const int b = bh / dims.heads, h = bh % dims.heads;
  const int kvh = h / (dims.heads / dims.kv_heads);
  const std::int64_t q_off = std::int64_t{bh} * seq * d;
  const std::int64_t kv_off = (std::int64_t{b} * dims.kv_heads + kvh) * seq * d;
  // The last query tiles see the most keys: hand them out first.
  const int q0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * br;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;

  load_rows(qs, ld.t, q + q_off, q0, br, seq, d, ld.dp);
  for (int idx = static_cast<int>(threadIdx.x); idx < br * ld.dp; idx += kThreads)
    os[idx / ld.dp * ld.f + idx % ld.dp] = 0.0f;
  for (int r = static_cast<int>(threadIdx.x); r < br; r += kThreads) {
    m_row[r] = -INFINITY;
    l_row[r] = 0.0f;
  }

  const int kv_end = min(seq, q0 + br);  // keys after the tile's last query are all masked
  for (int j0 = 0; j0 < kv_end; j0 += bc) {
    __syncthreads();  // the previous tile's P V has finished with ks, vs, ps
    load_rows(ks, ld.t, k + kv_off, j0, bc, seq, d, ld.dp);
    load_rows(vs, ld.t, v + kv_off, j0, bc, seq, d, ld.dp);
    __syncthreads();
    TileMma<T, false, true>::run(ss, ld.s, qs, ld.t, ks, ld.t, br, bc, ld.dp, false);
    __syncthreads();
    // Online softmax, a warp per row. Key 0 is visible to every row, so after the first tile
    // m is finite for every row and no exp(-inf - -inf) arises.
    for (int r = warp; r < br; r += kWarps) {
      const int i = q0 + r;
      float tile_max = -INFINITY;
      for (int c = lane; c < bc; c += 32) {
        const int j = j0 + c;
        if (j <= i && j < seq) tile_max = fmaxf(tile_max, ss[r * ld.s + c] * scale);
      }
      tile_max = warp_max(tile_max);
      const float m_old = m_row[r];
      const float m_new = fmaxf(m_old, tile_max);
      float sum = 0.0f;
      for (int c = lane; c < bc; c += 32) {
        const int j = j0 + c;
        const float p = (j <= i && j < seq) ? expf(ss[r * ld.s + c] * scale - m_new) : 0.0f;
        ps[r * ld.p + c] = from_f<T>(p);
        sum += p;
      }
      sum = warp_sum(sum);
      const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
      for (int c = lane; c < ld.dp; c += 32) os[r * ld.f + c] *= alpha;
      // Every lane has read m_row[r] above; the shuffles in warp_sum do not order shared-memory
      // accesses between lanes (racecheck saw lane 0's write race the other lanes' reads).
      __syncwarp();
      if (lane == 0) {
        m_row[r] = m_new;
        l_row[r] = l_row[r] * alpha + sum;
      }
    }
    __syncthreads();
    TileMma<T, false, false>::run(os, ld.f, ps, ld.p, vs, ld.t, br, ld.dp, bc, true);
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < br * d; idx += kThreads) {
    const int r = idx / d, c = idx % d, i = q0 + r;
    if (i < seq) o[q_off + std::int64_t{i} * d + c] = from_f<T>(os[r * ld.f + c] / l_row[r]);
  }
  for (int r = static_cast<int>(threadIdx.x); r < br; r += kThreads) {
    const int i = q0 + r;
    if (i < seq) lse[std::int64_t{bh} * seq + i] = m_row[r] + logf(l_row[r]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    flash_backward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const T* __restrict__ dout, const float* __restrict__ lse,
                          const float* __restrict__ delta, float* __restrict__ dq,
                          T* __restrict__ dk, T* __restrict__ dv, Dims dims, int br, int bc,
                          float scale) {
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardLayout L = backward_layout(br, bc, dims.head_dim, sizeof(T));
  const Strides ld(dims.head_dim, bc);
  T* ks = reinterpret_cast<T*>(smem + L.k);
  T* vs = reinterpret_cast<T*>(smem + L.v);
  float* dks = reinterpret_cast<float*>(smem + L.dk);
  float* dvs = reinterpret_cast<float*>(smem + L.dv);
  T* qs = reinterpret_cast<T*>(smem + L.q);
  T* dos = reinterpret_cast<T*>(smem + L.dout);
  float* ss = reinterpret_cast<float*>(smem + L.s);
  float* dps = reinterpret_cast<float*>(smem + L.dp);
  T* ps = reinterpret_cast<T*>(smem + L.p);
  T* dss = reinterpret_cast<T*>(smem + L.ds);
  float* dqs = reinterpret_cast<float*>(smem + L.dq);
  float* lse_s = reinterpret_cast<float*>(smem + L.lse);
  float* delta_s = reinterpret_cast<float*>(smem + L.delta);

  const int seq = dims.seq, d = dims.head_dim;
  const int group = dims.heads / dims.kv_heads;
  const int bkv = static_cast<int>(blockIdx.y);
  const int b = bkv / dims.kv_heads, kvh = bkv % dims.kv_heads;
  const std::int64_t kv_off = std::int64_t{bkv} * seq * d;
  // The first key tiles meet the most queries: hand them out first (blockIdx.x 0 = keys 0..).
  const int j0 = static_cast<int>(blockIdx.x) * bc;

  load_rows(ks, ld.t, k + kv_off, j0, bc, seq, d, ld.dp);
  load_rows(vs, ld.t, v + kv_off, j0, bc, seq, d, ld.dp);
  for (int idx = static_cast<int>(threadIdx.x); idx < bc * ld.dp; idx += kThreads) {
    const int r = idx / ld.dp, c = idx % ld.dp;
    dks[r * ld.f + c] = 0.0f;
    dvs[r * ld.f + c] = 0.0f;
  }

  for (int g = 0; g < group; ++g) {
    const int bh = b * dims.heads + kvh * group + g;
    const std::int64_t q_off = std::int64_t{bh} * seq * d;
    for (int i0 = j0 / br * br; i0 < seq; i0 += br) {  // queries before j0 see none of these keys
      __syncthreads();  // the previous tile is done with qs, dos, ps, dss, dqs
      load_rows(qs, ld.t, q + q_off, i0, br, seq, d, ld.dp);
      load_rows(dos, ld.t, dout + q_off, i0, br, seq, d, ld.dp);
      for (int r = static_cast<int>(threadIdx.x); r < br; r += kThreads) {
        const int i = i0 + r;
        lse_s[r] = i < seq ? lse[std::int64_t{bh} * seq + i] : 0.0f;
        delta_s[r] = i < seq ? delta[std::int64_t{bh} * seq + i] : 0.0f;
      }
      __syncthreads();
      TileMma<T, false, true>::run(ss, ld.s, qs, ld.t, ks, ld.t, br, bc, ld.dp, false);
      TileMma<T, false, true>::run(dps, ld.s, dos, ld.t, vs, ld.t, br, bc, ld.dp, false);
      __syncthreads();
      for (int idx = static_cast<int>(threadIdx.x); idx < br * bc; idx += kThreads) {
        const int r = idx / bc, c = idx % bc;
        const int i = i0 + r, j = j0 + c;
        const bool visible = j <= i && i < seq && j < seq;
        const float p = visible ? expf(ss[r * ld.s + c] * scale - lse_s[r]) : 0.0f;
        const float ds = p * (dps[r * ld.s + c] - delta_s[r]) * scale;
        ps[r * ld.p + c] = from_f<T>(p);
        dss[r * ld.p + c] = from_f<T>(ds);
      }
      __syncthreads();
      // Three products with distinct outputs and read-only inputs: no barrier between them.
      TileMma<T, true, false>::run(dvs, ld.f, ps, ld.p, dos, ld.t, bc, ld.dp, br, true);
      TileMma<T, true, false>::run(dks, ld.f, dss, ld.p, qs, ld.t, bc, ld.dp, br, true);
      TileMma<T, false, false>::run(dqs, ld.f, dss, ld.p, ks, ld.t, br, ld.dp, bc, false);
      __syncthreads();
      for (int idx = static_cast<int>(threadIdx.x); idx < br * d; idx += kThreads) {
        const int r = idx / d, c = idx % d, i = i0 + r;
        if (i < seq) atomicAdd(dq + q_off + std::int64_t{i} * d + c, dqs[r * ld.f + c]);
      }
    }
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < bc * d; idx += kThreads) {
    const int r = idx / d, c = idx % d, j = j0 + r;
    if (j < seq) {
      dk[kv_off + std::int64_t{j} * d + c] = from_f<T>(dks[r * ld.f + c]);
      dv[kv_off + std::int64_t{j} * d + c] = from_f<T>(dvs[r * ld.f + c]);
    }
  }
}

// delta[b, h, i] = sum over c of dO[b, i, h*D + c] * O[b, i, h*D + c]: a warp per row.
template <typename T>
__global__ void row_dot_kernel(const T* __restrict__ o, const T* __restrict__ dout,
                               float* __restrict__ delta, std::int64_t rows, int heads, int seq,
                               int d) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / 32);
  for (std::int64_t row = std::int64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32;
       row < rows; row += warps) {
    // row enumerates [B, H, S]; the token-layout offset of (b, i, h*D).
    const std::int64_t i = row % seq, bh = row / seq;
    const std::int64_t h = bh % heads, b = bh / heads;
    const std::int64_t base = (b * seq + i) * heads * d + h * d;
    float s = 0.0f;
    for (int c = lane; c < d; c += 32) s += to_f(o[base + c]) * to_f(dout[base + c]);
    s = warp_sum(s);
    if (lane == 0) delta[row] = s;
  }
}

template <typename T>
__global__ void f32_to_kernel(const float* __restrict__ src, T* __restrict__ dst, std::int64_t n) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    dst[i] = from_f<T>(src[i]);
}

std::size_t shared_limit() {
  int dev = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return static_cast<std::size_t>(optin);
}

// The FlashAttention-2 kernels run unless the call or PPBENCH_FLASH asks for the general ones.
bool general_only(FlashPath path) {
  return path == FlashPath::kGeneral || flash_path_from_environment() == FlashPath::kGeneral;
}

fa2::DeviceLimits device_limits() {
  int dev = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return {major, shared_limit()};
}

// Largest tiles that fit, from a list of (query rows, key rows) candidates.
template <typename Layout>
FlashTiles choose_tiles(std::initializer_list<std::pair<int, int>> candidates, int head_dim,
                        int elem, std::size_t limit, Layout layout) {
  for (auto [br, bc] : candidates) {
    const std::size_t bytes = layout(br, bc, head_dim, elem).bytes;
    if (bytes <= limit) return {br, bc, bytes};
  }
  return {};
}

Dims dims_of(const DTensor& q, const DTensor& k) {
  return {static_cast<int>(q.dim(1)), static_cast<int>(k.dim(1)), static_cast<int>(q.dim(2)),
          static_cast<int>(q.dim(3))};
}

[[noreturn]] void too_big(int head_dim, std::size_t limit) {
  throw std::invalid_argument("ppbench cuda kernel: fused attention: head_dim " +
                              std::to_string(head_dim) + " needs more shared memory than the " +
                              std::to_string(limit) + " bytes a block may have on this GPU");
}

}  // namespace

FlashPath flash_path_from_environment() {
  static const FlashPath path = [] {
    const char* v = std::getenv("PPBENCH_FLASH");
    const std::string s = v ? v : "";
    if (s.empty() || s == "auto") return FlashPath::kAuto;
    if (s == "general") return FlashPath::kGeneral;
    throw UsageError("PPBENCH_FLASH: '" + s +
                     "' is not a fused-attention path (allowed: auto, general)");
  }();
  return path;
}

FlashTiles flash_forward_tiles(int head_dim, int elem_bytes, std::size_t limit) {
  return choose_tiles({{64, 64}, {32, 64}, {32, 32}, {16, 32}, {16, 16}}, head_dim, elem_bytes,
                      limit,
                      [](int br, int bc, int d, int e) { return forward_layout(br, bc, d, e); });
}

FlashTiles flash_backward_tiles(int head_dim, int elem_bytes, std::size_t limit) {
  return choose_tiles({{64, 64}, {32, 64}, {32, 32}, {16, 32}, {16, 16}}, head_dim, elem_bytes,
                      limit,
                      [](int br, int bc, int d, int e) { return backward_layout(br, bc, d, e); });
}

void flash_attention_forward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                             const DTensor& o, const DTensor& lse, float scale, FlashPath path) {
  check_flash_forward(q, k, v, o, lse);
  const Dims dims = dims_of(q, k);
  const std::int64_t bh = q.dim(0) * q.dim(1);
  if (bh * dims.seq == 0) return;
  // bf16 at head_dim 64 / 128: the register-resident FlashAttention-2 kernel (see the top of this
  // file); everything else, and devices without its shared memory, the general kernel below.
  if (!general_only(path) && fa2::forward_applies(q.dtype() == DType::kBF16, dims.head_dim,
                                                  dims.seq, bh, scale, device_limits())) {
    fa2_forward(ctx, q, k, v, o, lse, scale);
    return;
  }
  const std::size_t limit = shared_limit();
  dispatch_float(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const FlashTiles t = flash_forward_tiles(dims.head_dim, sizeof(T), limit);
    if (t.shared_bytes == 0) too_big(dims.head_dim, limit);
    // Set for every launch: the attribute belongs to the current device (and context).
    CUDA_CHECK(cudaFuncSetAttribute(flash_forward_kernel<T>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(t.shared_bytes)));
    const dim3 grid(static_cast<unsigned>((dims.seq + t.query_rows - 1) / t.query_rows),
                    static_cast<unsigned>(bh));
    flash_forward_kernel<T><<<grid, kThreads, t.shared_bytes, ctx.stream>>>(
        q.as<T>(), k.as<T>(), v.as<T>(), o.as<T>(), lse.as<float>(), dims, t.query_rows, t.key_rows,
        scale);
  });
  CUDA_CHECK_LAUNCH();
}

void attention_row_dot(Context& ctx, const DTensor& o_tokens, const DTensor& do_tokens,
                       const DTensor& delta, std::int64_t heads, std::int64_t head_dim) {
  require(o_tokens.shape() == do_tokens.shape() && o_tokens.shape().size() == 3 &&
              o_tokens.dim(2) == heads * head_dim,
          "attention_row_dot: expects O and dO as [B, S, heads * head_dim], got " +
              shape_text(o_tokens.shape()) + " and " + shape_text(do_tokens.shape()));
  const std::int64_t rows = o_tokens.dim(0) * heads * o_tokens.dim(1);
  if (rows == 0) return;
  dispatch_float(o_tokens.dtype(), [&](auto tag) {
    using T = decltype(tag);
    row_dot_kernel<T><<<grid_for(rows * 32), 256, 0, ctx.stream>>>(
        o_tokens.as<T>(), do_tokens.as<T>(), delta.as<float>(), rows, static_cast<int>(heads),
        static_cast<int>(o_tokens.dim(1)), static_cast<int>(head_dim));
  });
  CUDA_CHECK_LAUNCH();
}

void flash_attention_backward(Context& ctx, const DTensor& q, const DTensor& k, const DTensor& v,
                              const DTensor& d_o, const DTensor& lse, const DTensor& delta,
                              const DTensor& dq, const DTensor& dk, const DTensor& dv, float scale,
                              FlashPath path) {
  check_flash_backward(q, k, v, d_o, lse, delta, dq, dk, dv);
  const Dims dims = dims_of(q, k);
  if (q.dim(0) * q.dim(1) * dims.seq == 0) return;
  const std::size_t limit = shared_limit();
  // Several key blocks add into one query row: accumulate dQ in f32, then round once.
  DTensor dq_acc(ctx.arena, q.shape(), DType::kF32, "fused attention dq accumulator");
  CUDA_CHECK(
      cudaMemsetAsync(dq_acc.data(), 0, static_cast<std::size_t>(dq_acc.bytes()), ctx.stream));
  // As in the forward: bf16 at head_dim 64 / 128 takes the FlashAttention-2 kernel. Each path
  // reads lse as the other writes it, so the forward and backward may choose differently.
  const bool use_fa2 =
      !general_only(path) && fa2::backward_applies(q.dtype() == DType::kBF16, dims.head_dim,
                                                   dims.seq, k.dim(0) * k.dim(1), device_limits());
  dispatch_float(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (use_fa2) {
      fa2_backward(ctx, q, k, v, d_o, lse, delta, dq_acc, dk, dv, scale);
      f32_to_kernel<T><<<grid_for(dq.numel()), 256, 0, ctx.stream>>>(dq_acc.as<float>(), dq.as<T>(),
                                                                     dq.numel());
      return;
    }
    const FlashTiles t = flash_backward_tiles(dims.head_dim, sizeof(T), limit);
    if (t.shared_bytes == 0) too_big(dims.head_dim, limit);
    CUDA_CHECK(cudaFuncSetAttribute(flash_backward_kernel<T>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(t.shared_bytes)));
    const dim3 grid(static_cast<unsigned>((dims.seq + t.key_rows - 1) / t.key_rows),
                    static_cast<unsigned>(k.dim(0) * k.dim(1)));
    flash_backward_kernel<T><<<grid, kThreads, t.shared_bytes, ctx.stream>>>(
        q.as<T>(), k.as<T>(), v.as<T>(), d_o.as<T>(), lse.as<float>(), delta.as<float>(),
        dq_acc.as<float>(), dk.as<T>(), dv.as<T>(), dims, t.query_rows, t.key_rows, scale);
    CUDA_CHECK_LAUNCH();
    f32_to_kernel<T>
        <<<grid_for(dq.numel()), 256, 0, ctx.stream>>>(dq_acc.as<float>(), dq.as<T>(), dq.numel());
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace ppbench::cuda
