#include "workloads/cpu/attention.h"

#include <cmath>
#include <limits>

#include "workloads/cpu/eigen_util.h"
#include "workloads/cpu/gemm.h"
#include "workloads/cpu/rope.h"

namespace ppbench::cpu {

namespace {

enum Slot { kQ, kK, kV, kP, kSlots };
enum Sub { kQkv, kOut, kSubs };

// One head's [seq, head_dim] block inside a [batch, seq, heads * head_dim] tensor.
template <typename T>
using HeadMap = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;

template <typename T>
HeadMap<T> head(Tensor<T>& x, std::int64_t b, std::int64_t h, std::int64_t d) {
  const std::int64_t seq = x.dim(1), width = x.dim(2);
  return HeadMap<T>(x.data.data() + b * seq * width + h * d, seq, d, Eigen::OuterStride<>(width));
}

AttentionConfig normalised(const AttentionConfig& config) {
  const AttentionConfig c = resolve_attention(config, check);
  check(!c.rope || c.head_dim % 2 == 0, "attention: rotary embedding needs an even head_dim");
  return c;
}

}  // namespace

template <typename T>
Attention<T>::Attention(const AttentionConfig& config, std::uint64_t seed)
    : cfg_(normalised(config)) {
  const std::int64_t d = cfg_.head_dim;
  qkv_ = std::make_unique<Linear<T>>(cfg_.hidden, (cfg_.heads + 2 * cfg_.kv_heads) * d, cfg_.bias,
                                     derive_seed(seed, 0));
  out_ = std::make_unique<Linear<T>>(cfg_.heads * d, cfg_.hidden, cfg_.bias, derive_seed(seed, 1));
  qkv_->weight.name = "wqkv";
  out_->weight.name = "wo";
  if (cfg_.bias) {
    qkv_->bias.name = "bqkv";
    out_->bias.name = "bo";
  }
}

template <typename T>
Tensor<T> Attention<T>::forward(const Tensor<T>& x, Saved<T>& saved) {
  check(x.shape.size() == 3 && x.dim(2) == cfg_.hidden, "attention: expects [batch, seq, hidden]");
  const std::int64_t batch = x.dim(0), seq = x.dim(1), d = cfg_.head_dim;
  const std::int64_t nh = cfg_.heads, nkv = cfg_.kv_heads, group = nh / nkv;
  saved.clear();
  saved.in_shape = x.shape;
  saved.sub.resize(kSubs);
  saved.t.resize(kSlots);

  // Split the fused projection into q | k | v.
  Tensor<T> qkv = qkv_->forward(x, saved.sub[kQkv]);
  Tensor<T> q({batch, seq, nh * d}), k({batch, seq, nkv * d}), v({batch, seq, nkv * d});
  {
    auto QKV = mat(qkv);
    mat(q) = QKV.leftCols(nh * d);
    mat(k) = QKV.middleCols(nh * d, nkv * d);
    mat(v) = QKV.rightCols(nkv * d);
  }
  if (cfg_.rope) {
    rope_rotate(q, nh, d, cfg_.rope_theta, false);
    rope_rotate(k, nkv, d, cfg_.rope_theta, false);
  }

  Tensor<T> probs({batch, nh, seq, seq});
  Tensor<T> o({batch, seq, nh * d});
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < nh; ++h) {
      const std::int64_t g = h / group;
      MatMap<T> P(probs.data.data() + (b * nh + h) * seq * seq, seq, seq);
      gemm(head(q, b, h, d), transposed(head(k, b, g, d)), P);
      // Causal softmax of row i over j <= i; masked entries are exactly 0.
      for (std::int64_t i = 0; i < seq; ++i) {
        auto row = P.row(i);
        const T m = row.head(i + 1).maxCoeff();
        row.head(i + 1) = ((row.head(i + 1).array() - m) * scale).exp();
        row.head(i + 1) /= row.head(i + 1).sum();
        row.tail(seq - i - 1).setZero();
      }
      gemm(P, head(v, b, g, d), head(o, b, h, d));
    }
  }
  saved.t[kQ] = std::move(q);
  saved.t[kK] = std::move(k);
  saved.t[kV] = std::move(v);
  saved.t[kP] = std::move(probs);
  return out_->forward(o, saved.sub[kOut]);
}

template <typename T>
Tensor<T> Attention<T>::backward_input(const Tensor<T>& dy, Saved<T>& saved) {
  Tensor<T>& q = saved.t[kQ];
  Tensor<T>& k = saved.t[kK];
  Tensor<T>& v = saved.t[kV];
  Tensor<T>& probs = saved.t[kP];
  const std::int64_t batch = q.dim(0), seq = q.dim(1), d = cfg_.head_dim;
  const std::int64_t nh = cfg_.heads, nkv = cfg_.kv_heads, group = nh / nkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));

  Tensor<T> d_o = out_->backward_input(dy, saved.sub[kOut]);
  Tensor<T> dq(q.shape), dk(k.shape), dv(v.shape);
  RowMat<T> dP(seq, seq);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < nh; ++h) {
      const std::int64_t g = h / group;
      MatMap<T> P(probs.data.data() + (b * nh + h) * seq * seq, seq, seq);
      auto dO = head(d_o, b, h, d);
      // The heads of one group share k and v, so their gradients add up.
      gemm(transposed(P), dO, head(dv, b, g, d), Gemm::kAccumulate);
      gemm(dO, transposed(head(v, b, g, d)), dP);
      // Softmax backward: dS = P * (dP - rowsum(P * dP)); masked entries stay 0 since P is 0.
      const Eigen::Matrix<T, Eigen::Dynamic, 1> rowdot = P.cwiseProduct(dP).rowwise().sum();
      dP = (P.array() * (dP.colwise() - rowdot).array()) * scale;
      gemm(dP, head(k, b, g, d), head(dq, b, h, d));
      gemm(transposed(dP), head(q, b, h, d), head(dk, b, g, d), Gemm::kAccumulate);
    }
  }
  if (cfg_.rope) {
    rope_rotate(dq, nh, d, cfg_.rope_theta, true);
    rope_rotate(dk, nkv, d, cfg_.rope_theta, true);
  }
  Tensor<T> dqkv({batch, seq, (nh + 2 * nkv) * d});
  {
    auto dQKV = mat(dqkv);
    dQKV.leftCols(nh * d) = mat(dq);
    dQKV.middleCols(nh * d, nkv * d) = mat(dk);
    dQKV.rightCols(nkv * d) = mat(dv);
  }
  // Only the projections' W passes remain.
  for (Tensor<T>& t : saved.t) t.release();
  return qkv_->backward_input(dqkv, saved.sub[kQkv]);
}

template <typename T>
void Attention<T>::backward_weight(Saved<T>& saved) {
  qkv_->backward_weight(saved.sub[kQkv]);
  out_->backward_weight(saved.sub[kOut]);
  saved.clear();
}

template <typename T>
std::vector<Param<T>*> Attention<T>::params() {
  std::vector<Param<T>*> p = qkv_->params();
  for (Param<T>* o : out_->params()) p.push_back(o);
  return p;
}

template class Attention<float>;
template class Attention<double>;

}  // namespace ppbench::cpu
