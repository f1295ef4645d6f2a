#include "workloads/cpu/blocks.h"

#include "workloads/cpu/activations.h"
#include "workloads/cpu/attention.h"
#include "workloads/cpu/concat.h"
#include "workloads/cpu/layernorm.h"
#include "workloads/cpu/linear.h"
#include "workloads/cpu/rmsnorm.h"
#include "workloads/cpu/swiglu.h"

namespace ppbench::cpu {

template <typename T>
Tensor<T> Sequential<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  saved.clear();
  saved.in_shape = x.shape;
  saved.sub.resize(layers_.size());
  Tensor<T> h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) h = layers_[i]->forward(h, saved.sub[i]);
  return h;
}

template <typename T>
Tensor<T> Sequential<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  Tensor<T> g = dy;
  for (std::size_t i = layers_.size(); i-- > 0;) g = layers_[i]->backward_input(g, saved.sub[i]);
  return g;
}

template <typename T>
void Sequential<T>::backward_weight(Saved<T>& saved) {
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->backward_weight(saved.sub[i]);
  saved.clear();
}

template <typename T>
std::vector<Param<T>*> Sequential<T>::params() {
  std::vector<Param<T>*> all;
  for (const LayerPtr<T>& l : layers_)
    for (Param<T>* p : l->params()) all.push_back(p);
  return all;
}

template <typename T>
Tensor<T> Residual<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  saved.clear();
  saved.in_shape = x.shape;
  saved.sub.resize(1);
  Tensor<T> y = inner_->forward(x, saved.sub[0]);
  add_into(y, x);
  return y;
}

template <typename T>
Tensor<T> Residual<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  Tensor<T> dx = inner_->backward_input(dy, saved.sub[0]);
  add_into(dx, dy);
  return dx;
}

template <typename T>
void Residual<T>::backward_weight(Saved<T>& saved) {
  inner_->backward_weight(saved.sub[0]);
  saved.clear();
}

template <typename T>
LayerPtr<T> make_mlp_block(std::int64_t in, std::int64_t out, std::uint64_t seed) {
  auto block = std::make_unique<Sequential<T>>("mlp_block");
  block->add(std::make_unique<Linear<T>>(in, out, true, seed));
  block->add(std::make_unique<GeLU<T>>());
  return block;
}

template <typename T>
LayerPtr<T> make_decoder_layer(const DecoderConfig& c, std::uint64_t seed) {
  auto norm = [&]() -> LayerPtr<T> {
    if (c.norm == DecoderConfig::Norm::kRMSNorm) {
      return std::make_unique<RMSNorm<T>>(c.hidden, c.norm_eps);
    }
    return std::make_unique<LayerNorm<T>>(c.hidden, c.norm_eps);
  };
  auto attn = std::make_unique<Sequential<T>>("attention_block");
  attn->add(norm());
  attn->add(std::make_unique<Attention<T>>(c.attention(), derive_seed(seed, 0)));

  auto ffn = std::make_unique<Sequential<T>>("ffn_block");
  ffn->add(norm());
  if (c.ffn_kind == DecoderConfig::Ffn::kSwiGLU) {
    ffn->add(std::make_unique<SwiGLU<T>>(c.hidden, c.ffn, derive_seed(seed, 1)));
  } else {
    ffn->add(std::make_unique<Linear<T>>(c.hidden, c.ffn, c.bias, derive_seed(seed, 1)));
    ffn->add(std::make_unique<GeLU<T>>());
    ffn->add(std::make_unique<Linear<T>>(c.ffn, c.hidden, c.bias, derive_seed(seed, 2)));
  }

  auto layer = std::make_unique<Sequential<T>>("decoder_layer");
  layer->add(std::make_unique<Residual<T>>(std::move(attn)));
  layer->add(std::make_unique<Residual<T>>(std::move(ffn)));
  return layer;
}

template class Sequential<float>;
template class Sequential<double>;
template class Residual<float>;
template class Residual<double>;
template LayerPtr<float> make_mlp_block<float>(std::int64_t, std::int64_t, std::uint64_t);
template LayerPtr<double> make_mlp_block<double>(std::int64_t, std::int64_t, std::uint64_t);
template LayerPtr<float> make_decoder_layer<float>(const DecoderConfig&, std::uint64_t);
template LayerPtr<double> make_decoder_layer<double>(const DecoderConfig&, std::uint64_t);

}  // namespace ppbench::cpu
