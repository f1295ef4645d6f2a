#include "workloads/cuda/attention.h"

#include <cmath>

#include "workloads/cuda/gemm.h"
#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/rope.cuh"

namespace ppbench::cuda {

namespace {

enum Slot { kQ, kK, kV, kP, kSlots };
enum Sub { kQkv, kOut, kSubs };
constexpr int kThreads = 256;

AttentionConfig normalised(AttentionConfig c) {
  require(c.hidden > 0 && c.heads > 0, "attention: hidden and heads must be positive");
  if (c.kv_heads == 0) c.kv_heads = c.heads;
  if (c.head_dim == 0) {
    require(c.hidden % c.heads == 0, "attention: heads must divide hidden");
    c.head_dim = c.hidden / c.heads;
  }
  require(c.kv_heads > 0 && c.heads % c.kv_heads == 0, "attention: kv_heads must divide heads");
  require(c.head_dim % 2 == 0, "attention: head_dim must be even");
  return c;
}

// Moves N heads between the token layout [B, S, W] (columns off + n*D .. of each token row) and
// the head-major layout [B, N, S, D], optionally rotating (rope = +1) or un-rotating (rope = -1)
// each pair (i, i + D/2) on the way. One thread per pair.
template <typename T, bool kToHeads>
__global__ void permute_heads_kernel(const T* __restrict__ src, T* __restrict__ dst,
                                     std::int64_t pairs, std::int64_t seq, std::int64_t nheads,
                                     std::int64_t d, std::int64_t width, std::int64_t off,
                                     int rope, double theta) {
  const std::int64_t half = d / 2;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       k < pairs; k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = k % half;
    std::int64_t r = k / half;
    const std::int64_t n = r % nheads;
    r /= nheads;
    const std::int64_t s = r % seq, b = r / seq;
    const std::int64_t tok = (b * seq + s) * width + off + n * d + i;
    const std::int64_t hd = ((b * nheads + n) * seq + s) * d + i;
    const std::int64_t from = kToHeads ? tok : hd, to = kToHeads ? hd : tok;
    float x1 = to_f(src[from]), x2 = to_f(src[from + half]);
    if (rope != 0) {
      float c, sn;
      rope_cos_sin(s, i, d, theta, &c, &sn);
      sn *= static_cast<float>(rope);
      const float y1 = x1 * c - x2 * sn, y2 = x1 * sn + x2 * c;
      x1 = y1;
      x2 = y2;
    }
    dst[to] = from_f<T>(x1);
    dst[to + half] = from_f<T>(x2);
  }
}

template <bool kToHeads>
void permute_heads(Context& ctx, const DTensor& src, const DTensor& dst, std::int64_t batch,
                   std::int64_t seq, std::int64_t nheads, std::int64_t d, std::int64_t width,
                   std::int64_t off, int rope, double theta) {
  const std::int64_t pairs = batch * seq * nheads * (d / 2);
  if (pairs == 0) return;
  dispatch_float(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    permute_heads_kernel<T, kToHeads><<<grid_for(pairs), 256, 0, ctx.stream>>>(
        src.as<T>(), dst.as<T>(), pairs, seq, nheads, d, width, off, rope, theta);
  });
  CUDA_CHECK_LAUNCH();
}

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

Attention::Attention(DeviceArena& params, const AttentionConfig& config, DType dtype,
                     std::uint64_t seed)
    : cfg_(normalised(config)), dtype_(dtype) {
  const std::int64_t d = cfg_.head_dim;
  qkv_ = std::make_unique<Linear>(params, cfg_.hidden, (cfg_.heads + 2 * cfg_.kv_heads) * d,
                                  cfg_.bias, dtype, cpu::derive_seed(seed, 0));
  out_ = std::make_unique<Linear>(params, cfg_.heads * d, cfg_.hidden, cfg_.bias, dtype,
                                  cpu::derive_seed(seed, 1));
  qkv_->weight.name = "wqkv";
  out_->weight.name = "wo";
  if (cfg_.bias) {
    qkv_->bias.name = "bqkv";
    out_->bias.name = "bo";
  }
}

DTensor Attention::forward(Context& ctx, const DTensor& x, Saved& saved) {
  require(x.shape().size() == 3 && x.dim(2) == cfg_.hidden && x.dtype() == dtype_,
          "attention: expects [batch, seq, hidden] in the layer dtype, got " +
              shape_text(x.shape()));
  const std::int64_t batch = x.dim(0), seq = x.dim(1), d = cfg_.head_dim;
  const std::int64_t nh = cfg_.heads, nkv = cfg_.kv_heads, group = nh / nkv;
  const std::int64_t width = (nh + 2 * nkv) * d;
  const int rope = cfg_.rope ? 1 : 0;
  saved.clear();
  saved.in_shape = x.shape();
  saved.sub.resize(kSubs);
  saved.t.resize(kSlots);

  DTensor q(ctx.arena, {batch, nh, seq, d}, dtype_, "attention q");
  DTensor k(ctx.arena, {batch, nkv, seq, d}, dtype_, "attention k");
  DTensor v(ctx.arena, {batch, nkv, seq, d}, dtype_, "attention v");
  {
    DTensor qkv = qkv_->forward(ctx, x, saved.sub[kQkv]);
    permute_heads<true>(ctx, qkv, q, batch, seq, nh, d, width, 0, rope, cfg_.rope_theta);
    permute_heads<true>(ctx, qkv, k, batch, seq, nkv, d, width, nh * d, rope, cfg_.rope_theta);
    permute_heads<true>(ctx, qkv, v, batch, seq, nkv, d, width, (nh + nkv) * d, 0, 0.0);
  }
  DTensor probs(ctx.arena, {batch, nh, seq, seq}, dtype_, "attention probabilities");
  DTensor oh(ctx.arena, {batch, nh, seq, d}, dtype_, "attention heads output");
  if (batch * seq > 0) {
    const GemmBatch per_group{static_cast<int>(batch * nkv), group * seq * d, seq * d,
                              group * seq * seq};
    {
      // Scores in f32 whatever the dtype: the softmax's exponent amplifies their rounding.
      DTensor scores(ctx.arena, {batch, nh, seq, seq}, DType::kF32, "attention scores");
      gemm(ctx, group * seq, seq, d, q.data(), false, k.data(), true, dtype_, scores.data(),
           DType::kF32, 1.0f, 0.0f, nullptr, per_group);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      dispatch_float(dtype_, [&](auto tag) {
        using T = decltype(tag);
        causal_softmax_forward_kernel<T>
            <<<static_cast<unsigned>(batch * nh * seq), kThreads, 0, ctx.stream>>>(
                scores.as<float>(), probs.as<T>(), static_cast<int>(seq), scale);
      });
      CUDA_CHECK_LAUNCH();
    }
    gemm(ctx, group * seq, d, seq, probs.data(), false, v.data(), false, dtype_, oh.data(),
         dtype_, 1.0f, 0.0f, nullptr,
         GemmBatch{static_cast<int>(batch * nkv), group * seq * seq, seq * d, group * seq * d});
  }
  DTensor o(ctx.arena, {batch, seq, nh * d}, dtype_, "attention output (pre-projection)");
  permute_heads<false>(ctx, oh, o, batch, seq, nh, d, nh * d, 0, 0, 0.0);
  oh.release();
  saved.t[kQ] = std::move(q);
  saved.t[kK] = std::move(k);
  saved.t[kV] = std::move(v);
  saved.t[kP] = std::move(probs);
  return out_->forward(ctx, o, saved.sub[kOut]);
}

DTensor Attention::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  const DTensor& q = saved.t[kQ];
  const DTensor& k = saved.t[kK];
  const DTensor& v = saved.t[kV];
  const DTensor& probs = saved.t[kP];
  const std::int64_t batch = q.dim(0), seq = q.dim(2), d = cfg_.head_dim;
  const std::int64_t nh = cfg_.heads, nkv = cfg_.kv_heads, group = nh / nkv;
  const std::int64_t width = (nh + 2 * nkv) * d;
  const int rope = cfg_.rope ? -1 : 0;

  DTensor dqkv(ctx.arena, {batch, seq, width}, dtype_, "attention qkv gradient");
  {
    DTensor d_o = out_->backward_input(ctx, dy, saved.sub[kOut]);
    DTensor doh(ctx.arena, {batch, nh, seq, d}, dtype_, "attention heads output gradient");
    permute_heads<true>(ctx, d_o, doh, batch, seq, nh, d, nh * d, 0, 0, 0.0);
    d_o.release();
    DTensor dq(ctx.arena, q.shape(), dtype_, "attention dq");
    DTensor dk(ctx.arena, k.shape(), dtype_, "attention dk");
    DTensor dv(ctx.arena, v.shape(), dtype_, "attention dv");
    if (batch * seq > 0) {
      const int nb = static_cast<int>(batch * nkv);
      // dV_g = P_g^T dO_g: the group's heads stack along k, so their contributions add up.
      gemm(ctx, seq, d, group * seq, probs.data(), true, doh.data(), false, dtype_, dv.data(),
           dtype_, 1.0f, 0.0f, nullptr,
           GemmBatch{nb, group * seq * seq, group * seq * d, seq * d});
      DTensor ds(ctx.arena, probs.shape(), dtype_, "attention score gradient");
      {
        DTensor dp(ctx.arena, probs.shape(), DType::kF32, "attention probability gradient");
        gemm(ctx, group * seq, seq, d, doh.data(), false, v.data(), true, dtype_, dp.data(),
             DType::kF32, 1.0f, 0.0f, nullptr,
             GemmBatch{nb, group * seq * d, seq * d, group * seq * seq});
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        dispatch_float(dtype_, [&](auto tag) {
          using T = decltype(tag);
          causal_softmax_backward_kernel<T>
              <<<static_cast<unsigned>(batch * nh * seq), kThreads, 0, ctx.stream>>>(
                  probs.as<T>(), dp.as<float>(), ds.as<T>(), static_cast<int>(seq), scale);
        });
        CUDA_CHECK_LAUNCH();
      }
      gemm(ctx, group * seq, d, seq, ds.data(), false, k.data(), false, dtype_, dq.data(),
           dtype_, 1.0f, 0.0f, nullptr,
           GemmBatch{nb, group * seq * seq, seq * d, group * seq * d});
      gemm(ctx, seq, d, group * seq, ds.data(), true, q.data(), false, dtype_, dk.data(), dtype_,
           1.0f, 0.0f, nullptr, GemmBatch{nb, group * seq * seq, group * seq * d, seq * d});
    }
    permute_heads<false>(ctx, dq, dqkv, batch, seq, nh, d, width, 0, rope, cfg_.rope_theta);
    permute_heads<false>(ctx, dk, dqkv, batch, seq, nkv, d, width, nh * d, rope,
                         cfg_.rope_theta);
    permute_heads<false>(ctx, dv, dqkv, batch, seq, nkv, d, width, (nh + nkv) * d, 0, 0.0);
  }
  // Only the projections' W passes remain.
  for (DTensor& t : saved.t) t.release();
  return qkv_->backward_input(ctx, dqkv, saved.sub[kQkv]);
}

void Attention::backward_weight(Context& ctx, Saved& saved) {
  qkv_->backward_weight(ctx, saved.sub[kQkv]);
  out_->backward_weight(ctx, saved.sub[kOut]);
  saved.clear();
}

std::vector<Param*> Attention::params() {
  std::vector<Param*> p = qkv_->params();
  for (Param* o : out_->params()) p.push_back(o);
  return p;
}

}  // namespace ppbench::cuda
