#include <cmath>

#include "workloads/counter_rng.h"
#include "workloads/cuda/attention.h"
#include "workloads/cuda/attention_core.h"
#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/rope.cuh"

namespace ppbench::cuda {

namespace {

// kStats: the log-sum-exp per query (fused) or the probabilities (materialised).
enum Slot { kQ, kK, kV, kStats, kSlots };
enum Sub { kQkv, kOut, kSubs };
AttentionConfig normalised(const AttentionConfig& config) {
  const AttentionConfig c = resolve_attention(config, require);
  require(c.head_dim % 2 == 0, "attention: head_dim must be even");
  return c;
}

// Moves N heads between the token layout [B, S, W] (columns off + n*D .. of each token row) and
// the head-major layout [B, N, S, D], optionally rotating (rope = +1) or un-rotating (rope = -1)
// each pair (i, i + D/2) on the way. One thread per pair.
template <typename T, bool kToHeads>
__global__ void permute_heads_kernel(const T* __restrict__ src, T* __restrict__ dst,
                                     std::int64_t pairs, std::int64_t seq, std::int64_t nheads,
                                     std::int64_t d, std::int64_t width, std::int64_t off, int rope,
                                     double theta) {
  const std::int64_t half = d / 2;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < pairs;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
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

}  // namespace

const char* attention_kernel_name(AttentionKernel k) {
  return k == AttentionKernel::kFused ? "fused" : "materialised";
}

Attention::Attention(DeviceArena& params, const AttentionConfig& config, DType dtype,
                     std::uint64_t seed, AttentionKernel kernel)
    : cfg_(normalised(config)), dtype_(dtype), kernel_(kernel) {
  const std::int64_t d = cfg_.head_dim;
  qkv_ = std::make_unique<Linear>(params, cfg_.hidden, (cfg_.heads + 2 * cfg_.kv_heads) * d,
                                  cfg_.bias, dtype, derive_seed(seed, 0));
  out_ = std::make_unique<Linear>(params, cfg_.heads * d, cfg_.hidden, cfg_.bias, dtype,
                                  derive_seed(seed, 1));
  qkv_->weight.name = "wqkv";
  out_->weight.name = "wo";
  if (cfg_.bias) {
    qkv_->bias.name = "bqkv";
    out_->bias.name = "bo";
  }
}

DTensor Attention::forward(Context& ctx, const DTensor& x, Saved& saved) {
  require(
      x.shape().size() == 3 && x.dim(2) == cfg_.hidden && x.dtype() == dtype_,
      "attention: expects [batch, seq, hidden] in the layer dtype, got " + shape_text(x.shape()));
  const std::int64_t batch = x.dim(0), seq = x.dim(1), d = cfg_.head_dim;
  const std::int64_t nh = cfg_.heads, nkv = cfg_.kv_heads;
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
  DTensor oh(ctx.arena, {batch, nh, seq, d}, dtype_, "attention heads output");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  if (kernel_ == AttentionKernel::kFused) {
    DTensor lse(ctx.arena, {batch, nh, seq}, DType::kF32, "attention log-sum-exp");
    flash_attention_forward(ctx, q, k, v, oh, lse, scale);
    saved.t[kStats] = std::move(lse);
  } else {
    saved.t[kStats] = materialised_attention_forward(ctx, q, k, v, oh, scale);
  }
  DTensor o(ctx.arena, {batch, seq, nh * d}, dtype_, "attention output (pre-projection)");
  permute_heads<false>(ctx, oh, o, batch, seq, nh, d, nh * d, 0, 0, 0.0);
  oh.release();
  saved.t[kQ] = std::move(q);
  saved.t[kK] = std::move(k);
  saved.t[kV] = std::move(v);
  return out_->forward(ctx, o, saved.sub[kOut]);
}

DTensor Attention::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  const DTensor& q = saved.t[kQ];
  const DTensor& k = saved.t[kK];
  const DTensor& v = saved.t[kV];
  const DTensor& stats = saved.t[kStats];
  const std::int64_t batch = q.dim(0), seq = q.dim(2), d = cfg_.head_dim;
  const std::int64_t nh = cfg_.heads, nkv = cfg_.kv_heads;
  const std::int64_t width = (nh + 2 * nkv) * d;
  const int rope = cfg_.rope ? -1 : 0;

  DTensor dqkv(ctx.arena, {batch, seq, width}, dtype_, "attention qkv gradient");
  {
    DTensor d_o = out_->backward_input(ctx, dy, saved.sub[kOut]);
    DTensor doh(ctx.arena, {batch, nh, seq, d}, dtype_, "attention heads output gradient");
    permute_heads<true>(ctx, d_o, doh, batch, seq, nh, d, nh * d, 0, 0, 0.0);
    DTensor delta;  // fused only: rowsum(dO * O) per query, from the token layout
    if (kernel_ == AttentionKernel::kFused) {
      delta = DTensor(ctx.arena, {batch, nh, seq}, DType::kF32, "attention rowsum(dO * O)");
      attention_row_dot(ctx, Linear::saved_input(saved.sub[kOut]), d_o, delta, nh, d);
    }
    d_o.release();
    DTensor dq(ctx.arena, q.shape(), dtype_, "attention dq");
    DTensor dk(ctx.arena, k.shape(), dtype_, "attention dk");
    DTensor dv(ctx.arena, v.shape(), dtype_, "attention dv");
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    if (kernel_ == AttentionKernel::kFused) {
      flash_attention_backward(ctx, q, k, v, doh, stats, delta, dq, dk, dv, scale);
    } else {
      materialised_attention_backward(ctx, q, k, v, stats, doh, dq, dk, dv, scale);
    }
    permute_heads<false>(ctx, dq, dqkv, batch, seq, nh, d, width, 0, rope, cfg_.rope_theta);
    permute_heads<false>(ctx, dk, dqkv, batch, seq, nkv, d, width, nh * d, rope, cfg_.rope_theta);
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
