#include "workloads/counter_rng.h"
#include "workloads/cuda/activations.h"
#include "workloads/cuda/attention.h"
#include "workloads/cuda/blocks.h"
#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/layernorm.h"
#include "workloads/cuda/linear.h"
#include "workloads/cuda/rmsnorm.h"
#include "workloads/cuda/swiglu.h"

namespace ppbench::cuda {

namespace {

template <typename T>
__global__ void add_kernel(T* __restrict__ y, const T* __restrict__ x, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    y[i] = from_f<T>(to_f(y[i]) + to_f(x[i]));
  }
}

}  // namespace

void add_into(Context& ctx, const DTensor& y, const DTensor& x) {
  require(y.shape() == x.shape() && y.dtype() == x.dtype(),
          "add: " + shape_text(y.shape()) + " += " + shape_text(x.shape()));
  const std::int64_t n = y.numel();
  if (n == 0) return;
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(y.as<T>(), x.as<T>(), n);
  });
  CUDA_CHECK_LAUNCH();
}

DTensor add_unshared(Context& ctx, DTensor a, const DTensor& b, const char* what) {
  if (a.shared()) {
    DTensor copy(ctx.arena, a.shape(), a.dtype(), what);
    CUDA_CHECK(cudaMemcpyAsync(copy.data(), a.data(), static_cast<std::size_t>(a.bytes()),
                               cudaMemcpyDeviceToDevice, ctx.stream));
    a = std::move(copy);
  }
  add_into(ctx, a, b);
  return a;
}

DTensor Sequential::forward(Context& ctx, const DTensor& x, Saved& saved) {
  saved.clear();
  saved.in_shape = x.shape();
  saved.sub.resize(layers_.size());
  DTensor h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) h = layers_[i]->forward(ctx, h, saved.sub[i]);
  return h;
}

DTensor Sequential::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  DTensor g = dy;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    g = layers_[i]->backward_input(ctx, g, saved.sub[i]);
  }
  return g;
}

void Sequential::backward_weight(Context& ctx, Saved& saved) {
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->backward_weight(ctx, saved.sub[i]);
  saved.clear();
}

std::vector<Param*> Sequential::params() {
  std::vector<Param*> all;
  for (const LayerPtr& l : layers_)
    for (Param* p : l->params()) all.push_back(p);
  return all;
}

DTensor Residual::forward(Context& ctx, const DTensor& x, Saved& saved) {
  saved.clear();
  saved.in_shape = x.shape();
  saved.sub.resize(1);
  DTensor y = inner_->forward(ctx, x, saved.sub[0]);
  // Not in place when the inner layer saved its output (ReLU keeps y).
  return add_unshared(ctx, std::move(y), x, "residual output");
}

DTensor Residual::backward_input(Context& ctx, const DTensor& dy, Saved& saved) {
  DTensor dx = inner_->backward_input(ctx, dy, saved.sub[0]);
  // Not in place when the inner I handed dy back as is (an identity).
  return add_unshared(ctx, std::move(dx), dy, "residual input gradient");
}

void Residual::backward_weight(Context& ctx, Saved& saved) {
  inner_->backward_weight(ctx, saved.sub[0]);
  saved.clear();
}

LayerPtr make_mlp_block(DeviceArena& params, std::int64_t in, std::int64_t out, DType dtype,
                        std::uint64_t seed) {
  auto block = std::make_unique<Sequential>("mlp_block");
  block->add(std::make_unique<Linear>(params, in, out, true, dtype, seed));
  block->add(std::make_unique<GeLU>());
  return block;
}

LayerPtr make_decoder_layer(DeviceArena& params, const DecoderConfig& c, DType dtype,
                            std::uint64_t seed) {
  auto norm = [&]() -> LayerPtr {
    if (c.norm == DecoderConfig::Norm::kRMSNorm) {
      return std::make_unique<RMSNorm>(params, c.hidden, dtype, c.norm_eps);
    }
    return std::make_unique<LayerNorm>(params, c.hidden, dtype, c.norm_eps);
  };
  auto attn = std::make_unique<Sequential>("attention_block");
  attn->add(norm());
  attn->add(std::make_unique<Attention>(params, c.attention(), dtype, derive_seed(seed, 0)));

  auto ffn = std::make_unique<Sequential>("ffn_block");
  ffn->add(norm());
  if (c.ffn_kind == DecoderConfig::Ffn::kSwiGLU) {
    ffn->add(std::make_unique<SwiGLU>(params, c.hidden, c.ffn, dtype, derive_seed(seed, 1)));
  } else {
    ffn->add(
        std::make_unique<Linear>(params, c.hidden, c.ffn, c.bias, dtype, derive_seed(seed, 1)));
    ffn->add(std::make_unique<GeLU>());
    ffn->add(
        std::make_unique<Linear>(params, c.ffn, c.hidden, c.bias, dtype, derive_seed(seed, 2)));
  }

  auto layer = std::make_unique<Sequential>("decoder_layer");
  layer->add(std::make_unique<Residual>(std::move(attn)));
  layer->add(std::make_unique<Residual>(std::move(ffn)));
  return layer;
}

}  // namespace ppbench::cuda
