// The materialised attention core (attention_core.h): [B, H, S, S] scores through batched
// cuBLASLt GEMMs, a causal softmax kernel, and GEMMs for P v and the backward.
//
// Per (batch, kv group) one strided batched GEMM computes the scores of the group's heads against
// their shared k: the heads of a group are adjacent in the head-major layout, so GQA needs no
// copy of k or v. The masked half of the scores is computed and then zeroed.
#include <cmath>

#include "workloads/cuda/attention_core.h"
#include "workloads/cuda/gemm.h"
#include "workloads/cuda/kernel_util.cuh"

namespace ppbench::cuda {

namespace {

constexpr int kThreads = 256;

// Row r of [B, H, S, S] is query position i = r % S; keys j > i are masked to exactly 0, as in
// the CPU kernel: p_j = exp((s_j - max) * scale) / sum over j <= i.
template <typename T>
__global__ void causal_softmax_forward_kernel(const float* __restrict__ scores,
                                              T* __restrict__ probs, int seq, float scale) {
  const std::int64_t r = blockIdx.x;
  const int i = static_cast<int>(r % seq);
  const float* sr = scores + r * seq;
  T* pr = probs + r * seq;
  float m = -INFINITY;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, sr[j]);
  m = block_max(m);
  float s = 0.0f;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) s += expf((sr[j] - m) * scale);
  const float inv = 1.0f / block_sum(s);
  for (int j = threadIdx.x; j < seq; j += blockDim.x) {
    pr[j] = from_f<T>(j <= i ? expf((sr[j] - m) * scale) * inv : 0.0f);
  }
}

// dS = P * (dP - rowsum(P * dP)) * scale; masked entries stay 0 since P is 0 there.
template <typename T>
__global__ void causal_softmax_backward_kernel(const T* __restrict__ probs,
                                               const float* __restrict__ dprobs,
                                               T* __restrict__ dscores, int seq, float scale) {
  const std::int64_t r = blockIdx.x;
  const int i = static_cast<int>(r % seq);
  const T* pr = probs + r * seq;
  const float* dpr = dprobs + r * seq;
  float s = 0.0f;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) s += to_f(pr[j]) * dpr[j];
  const float dot = block_sum(s);
  for (int j = threadIdx.x; j < seq; j += blockDim.x) {
    dscores[r * seq + j] = from_f<T>(j <= i ? to_f(pr[j]) * (dpr[j] - dot) * scale : 0.0f);
  }
}

}  // namespace

DTensor materialised_attention_forward(Context& ctx, const DTensor& q, const DTensor& k,
                                       const DTensor& v, const DTensor& o, float scale) {
  const DType dt = q.dtype();
  const std::int64_t batch = q.dim(0), nh = q.dim(1), seq = q.dim(2), d = q.dim(3);
  const std::int64_t nkv = k.dim(1), group = nh / nkv;
  DTensor probs(ctx.arena, {batch, nh, seq, seq}, dt, "attention probabilities");
  if (batch * seq == 0) return probs;
  const GemmBatch per_group{static_cast<int>(batch * nkv), group * seq * d, seq * d,
                            group * seq * seq};
  {
    // Scores in f32 whatever the dtype: the softmax's exponent amplifies their rounding.
    DTensor scores(ctx.arena, {batch, nh, seq, seq}, DType::kF32, "attention scores");
    gemm(ctx, group * seq, seq, d, q.data(), false, k.data(), true, dt, scores.data(), DType::kF32,
         1.0f, 0.0f, nullptr, per_group);
    dispatch_float(dt, [&](auto tag) {
      using T = decltype(tag);
      causal_softmax_forward_kernel<T>
          <<<static_cast<unsigned>(batch * nh * seq), kThreads, 0, ctx.stream>>>(
              scores.as<float>(), probs.as<T>(), static_cast<int>(seq), scale);
    });
    CUDA_CHECK_LAUNCH();
  }
  gemm(ctx, group * seq, d, seq, probs.data(), false, v.data(), false, dt, o.data(), dt, 1.0f, 0.0f,
       nullptr,
       GemmBatch{static_cast<int>(batch * nkv), group * seq * seq, seq * d, group * seq * d});
  return probs;
}

void materialised_attention_backward(Context& ctx, const DTensor& q, const DTensor& k,
                                     const DTensor& v, const DTensor& probs, const DTensor& d_o,
                                     const DTensor& dq, const DTensor& dk, const DTensor& dv,
                                     float scale) {
  const DType dt = q.dtype();
  const std::int64_t batch = q.dim(0), nh = q.dim(1), seq = q.dim(2), d = q.dim(3);
  const std::int64_t nkv = k.dim(1), group = nh / nkv;
  if (batch * seq == 0) return;
  const int nb = static_cast<int>(batch * nkv);
  // dV_g = P_g^T dO_g: the group's heads stack along k, so their contributions add up.
  gemm(ctx, seq, d, group * seq, probs.data(), true, d_o.data(), false, dt, dv.data(), dt, 1.0f,
       0.0f, nullptr, GemmBatch{nb, group * seq * seq, group * seq * d, seq * d});
  DTensor ds(ctx.arena, probs.shape(), dt, "attention score gradient");
  {
    DTensor dp(ctx.arena, probs.shape(), DType::kF32, "attention probability gradient");
    gemm(ctx, group * seq, seq, d, d_o.data(), false, v.data(), true, dt, dp.data(), DType::kF32,
         1.0f, 0.0f, nullptr, GemmBatch{nb, group * seq * d, seq * d, group * seq * seq});
    dispatch_float(dt, [&](auto tag) {
      using T = decltype(tag);
      causal_softmax_backward_kernel<T>
          <<<static_cast<unsigned>(batch * nh * seq), kThreads, 0, ctx.stream>>>(
              probs.as<T>(), dp.as<float>(), ds.as<T>(), static_cast<int>(seq), scale);
    });
    CUDA_CHECK_LAUNCH();
  }
  gemm(ctx, group * seq, d, seq, ds.data(), false, k.data(), false, dt, dq.data(), dt, 1.0f, 0.0f,
       nullptr, GemmBatch{nb, group * seq * seq, seq * d, group * seq * d});
  gemm(ctx, seq, d, group * seq, ds.data(), true, q.data(), false, dt, dk.data(), dt, 1.0f, 0.0f,
       nullptr, GemmBatch{nb, group * seq * seq, group * seq * d, seq * d});
}

}  // namespace ppbench::cuda
