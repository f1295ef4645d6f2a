// The FlashAttention-2 bf16 kernels (workloads/cuda/flash_fa2_{forward,backward}_kernel.cuh), their
// own source compiled for the host and run by emulated warps (simt.h, fa2_instructions.h), held to
// causal attention computed in double on the CPU: O, the log-sum-exp, dQ, dK and dV, at
// head_dim 64 and 128, with GQA and sequence lengths that end inside a tile. Needs no GPU, so
// the kernels are checked on every machine before a GPU's time goes to them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/simt/fa2_instructions.h"
// After the emulated instructions: the kernels as the GPU build compiles them.
#include "workloads/cuda/flash_fa2_backward_kernel.cuh"
#include "workloads/cuda/flash_fa2_forward_kernel.cuh"

namespace ppbench::cuda::fa2 {
namespace {

struct Shape {
  int batch, heads, kv_heads, seq, head_dim;
  std::string name() const {
    return "B" + std::to_string(batch) + " H" + std::to_string(heads) + " Hkv" +
           std::to_string(kv_heads) + " S" + std::to_string(seq) + " D" + std::to_string(head_dim);
  }
};

// A bf16 tensor and its values as doubles (the values the kernel reads, exactly).
struct Bf16Tensor {
  std::vector<bf16> bits;
  std::vector<double> value;
};

Bf16Tensor random_bf16(std::size_t n, std::mt19937& gen) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Bf16Tensor t;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t b = bf16_bits_rn(dist(gen));
    t.bits.push_back({b});
    t.value.push_back(bf16_value(b));
  }
  return t;
}

std::vector<double> values_of(const std::vector<bf16>& bits) {
  std::vector<double> v;
  for (bf16 b : bits) v.push_back(bf16_value(b.bits));
  return v;
}

// ||x - ref|| / max(||ref||, 1e-3 sqrt(n)): the inputs are of order 1, and a gradient that
// cancels to zero (with one key, dS = P (dP - delta) = 0 exactly) is judged against the floor.
double relative_error(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  const double floor = 1e-3 * std::sqrt(static_cast<double>(ref.size()));
  return std::sqrt(num) / std::max(std::sqrt(den), floor);
}

// Causal attention in double: q [B, H, S, D], k and v [B, Hkv, S, D], head h reading kv head
// h / (H / Hkv); the scores scaled by `scale`.
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

Reference reference(const Shape& s, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, const std::vector<double>& d_o, double scale) {
  const int S = s.seq, D = s.head_dim, group = s.heads / s.kv_heads;
  Reference r;
  const std::size_t qn = std::size_t(s.batch) * s.heads * S * D;
  const std::size_t kn = std::size_t(s.batch) * s.kv_heads * S * D;
  r.o.assign(qn, 0), r.dq.assign(qn, 0), r.dk.assign(kn, 0), r.dv.assign(kn, 0);
  r.lse.assign(std::size_t(s.batch) * s.heads * S, 0);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const std::size_t qo = (std::size_t(b) * s.heads + h) * S * D;
      const std::size_t ko = (std::size_t(b) * s.kv_heads + h / group) * S * D;
      for (int i = 0; i < S; ++i) {
        std::vector<double> p(static_cast<std::size_t>(i) + 1);
        double m = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int c = 0; c < D; ++c) dot += q[qo + i * D + c] * k[ko + j * D + c];
          p[j] = dot * scale;
          m = std::max(m, p[j]);
        }
        double l = 0;
        for (double& x : p) l += (x = std::exp(x - m));
        for (double& x : p) x /= l;
        r.lse[(std::size_t(b) * s.heads + h) * S + i] = m + std::log(l);
        for (int j = 0; j <= i; ++j)
          for (int c = 0; c < D; ++c) r.o[qo + i * D + c] += p[j] * v[ko + j * D + c];
        double delta = 0;
        for (int c = 0; c < D; ++c) delta += d_o[qo + i * D + c] * r.o[qo + i * D + c];
        for (int j = 0; j <= i; ++j) {
          double dp = 0;
          for (int c = 0; c < D; ++c) {
            dp += d_o[qo + i * D + c] * v[ko + j * D + c];
            r.dv[ko + j * D + c] += p[j] * d_o[qo + i * D + c];
          }
          const double ds = p[j] * (dp - delta) * scale;
          for (int c = 0; c < D; ++c) {
            r.dq[qo + i * D + c] += ds * k[ko + j * D + c];
            r.dk[ko + j * D + c] += ds * q[qo + i * D + c];
          }
        }
      }
    }
  return r;
}

void reset_block(unsigned) {
  fill_shared();
  reset_copies();
}

// The launchers' launches (flash_fa2_{forward,backward}.cu): as many blocks, threads and dynamic
// shared bytes, less `shortfall` bytes of the latter, for one launch only.
struct SharedLaunched {
  explicit SharedLaunched(std::size_t bytes) { shared_launched = bytes; }
  ~SharedLaunched() { shared_launched = kSharedCapacity; }
};

template <int D>
void launch_forward(const Shape& s, const Bf16Tensor& q, const Bf16Tensor& k, const Bf16Tensor& v,
                    std::vector<bf16>& o, std::vector<float>& lse, float scale,
                    simt::Interleaving interleaving = {}, std::size_t shortfall = 0) {
  const SharedLaunched launched(ForwardTiles<D>::kSharedBytes - shortfall);
  const Dims dims{s.batch, s.heads, s.kv_heads, s.seq};
  simt::launch(
      static_cast<unsigned>(forward_blocks(s.seq, std::int64_t{s.batch} * s.heads)),
      ForwardTiles<D>::kThreads,
      [&] {
        fa2_forward_kernel<D>(q.bits.data(), k.bits.data(), v.bits.data(), o.data(), lse.data(),
                              dims, scale, scale * kLog2e);
      },
      reset_block, interleaving);
}

template <int D>
void launch_backward(const Shape& s, const Bf16Tensor& q, const Bf16Tensor& k, const Bf16Tensor& v,
                     const Bf16Tensor& d_o, const std::vector<float>& lse,
                     const std::vector<float>& delta, std::vector<float>& dq, std::vector<bf16>& dk,
                     std::vector<bf16>& dv, float scale, simt::Interleaving interleaving = {},
                     std::size_t shortfall = 0) {
  const SharedLaunched launched(BackwardTiles<D>::kSharedBytes - shortfall);
  const Dims dims{s.batch, s.heads, s.kv_heads, s.seq};
  simt::launch(
      static_cast<unsigned>(backward_blocks(s.seq, std::int64_t{s.batch} * s.kv_heads)),
      BackwardTiles<D>::kThreads,
      [&] {
        fa2_backward_kernel<D>(q.bits.data(), k.bits.data(), v.bits.data(), d_o.bits.data(),
                               lse.data(), delta.data(), dq.data(), dk.data(), dv.data(), dims,
                               scale, scale * kLog2e);
      },
      reset_block, interleaving);
}

// What a check computed, to compare across interleavings.
struct Outputs {
  std::vector<bf16> o, dk, dv;
  std::vector<float> lse, dq;
};

bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](bf16 x, bf16 y) { return x.bits == y.bits; });
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <int D>
Outputs check(const Shape& s, simt::Interleaving interleaving = {}) {
  SCOPED_TRACE(s.name() + ", threads " + simt::to_string(interleaving));
  std::mt19937 gen(20261127u + static_cast<unsigned>(s.seq * 131 + D));
  const std::size_t qn = std::size_t(s.batch) * s.heads * s.seq * D;
  const std::size_t kn = std::size_t(s.batch) * s.kv_heads * s.seq * D;
  const std::size_t rows = std::size_t(s.batch) * s.heads * s.seq;
  const Bf16Tensor q = random_bf16(qn, gen), k = random_bf16(kn, gen), v = random_bf16(kn, gen),
                   d_o = random_bf16(qn, gen);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const Reference ref = reference(s, q.value, k.value, v.value, d_o.value, scale);

  std::vector<bf16> o(qn, bf16{0xFFFF});
  std::vector<float> lse(rows, NAN);
  launch_forward<D>(s, q, k, v, o, lse, scale, interleaving);
  const std::vector<double> o_values = values_of(o);
  EXPECT_LT(relative_error(o_values, ref.o), 1e-2) << "O";
  double worst_lse = 0;
  for (std::size_t i = 0; i < rows; ++i)
    worst_lse = std::max(worst_lse, std::abs(lse[i] - ref.lse[i]));
  EXPECT_LT(worst_lse, 1e-3) << "log-sum-exp";

  // delta = rowsum(dO o O) from the forward's own O, as the caller's row_dot kernel computes it.
  std::vector<float> delta(rows, 0.0f);
  for (std::size_t row = 0; row < rows; ++row) {
    double sum = 0;
    for (int c = 0; c < D; ++c) sum += d_o.value[row * D + c] * o_values[row * D + c];
    delta[row] = static_cast<float>(sum);
  }
  std::vector<float> dq(qn, 0.0f);
  std::vector<bf16> dk(kn, bf16{0xFFFF}), dv(kn, bf16{0xFFFF});
  launch_backward<D>(s, q, k, v, d_o, lse, delta, dq, dk, dv, scale, interleaving);
  EXPECT_LT(relative_error(std::vector<double>(dq.begin(), dq.end()), ref.dq), 1e-2) << "dQ";
  EXPECT_LT(relative_error(values_of(dk), ref.dk), 1e-2) << "dK";
  EXPECT_LT(relative_error(values_of(dv), ref.dv), 1e-2) << "dV";
  return {o, dk, dv, lse, dq};
}

// The same problem with the block's threads run in other orders between barriers and warp-wide
// instructions (simt::Interleaving): a race-free kernel computes the same bits (dQ, which the
// key blocks sum with atomics in whatever order they reach it, within the reference's
// tolerance), where a read of shared memory that no barrier orders after its write would give
// another answer.
template <int D>
void check_every_order(const Shape& s) {
  const Outputs first = check<D>(s);
  for (const simt::Interleaving& i : {simt::Interleaving{simt::Order::kReversed, 0},
                                      simt::Interleaving{simt::Order::kShuffled, 1},
                                      simt::Interleaving{simt::Order::kShuffled, 2}}) {
    SCOPED_TRACE(s.name() + ", threads " + simt::to_string(i));
    const Outputs other = check<D>(s, i);
    EXPECT_TRUE(same_bits(other.o, first.o)) << "O";
    EXPECT_TRUE(same_bits(other.lse, first.lse)) << "log-sum-exp";
    EXPECT_TRUE(same_bits(other.dk, first.dk)) << "dK";
    EXPECT_TRUE(same_bits(other.dv, first.dv)) << "dV";
  }
}

// Two query tiles and a half in the forward, two key blocks in the backward, two heads on one
// kv head.
TEST(Flash2Emulated, HeadDim64MatchesCausalAttention) { check<64>({1, 2, 1, 160, 64}); }

// One tile that ends early, a kv head per query head, two sequences of the batch.
TEST(Flash2Emulated, HeadDim128MatchesCausalAttention) { check<128>({2, 1, 1, 72, 128}); }

// Both head dims again with the block's threads in four orders: no result depends on it.
TEST(Flash2Emulated, NoResultDependsOnTheOrderOfTheThreads) {
  check_every_order<64>({1, 2, 1, 160, 64});
  check_every_order<128>({1, 2, 1, 72, 128});
}

// The edges of the tiling: a single query (one row of one tile), exactly one tile, one row past
// two tiles (the backward's second key block holds a single key), and GQA groups of 4 and 8
// across two sequences.
TEST(Flash2Emulated, TileEdgesAndGqaGroups) {
  check<64>({1, 4, 1, 1, 64});
  check<64>({1, 8, 2, 64, 64});
  check<64>({2, 4, 1, 129, 64});
  check<128>({1, 8, 1, 65, 128});
}

// Each kernel reaches the end of the shared memory its launcher asks for, and no further: 16 bytes
// less and a copy or ldmatrix falls outside the launch's shared memory, as it would fault on a
// GPU. (Two key tiles, so that both of the forward's stages are used.)
template <int D>
void check_shared_bounds() {
  const Shape s{1, 1, 1, 128, D};
  std::mt19937 gen(7);
  const std::size_t n = std::size_t(s.seq) * D, rows = std::size_t(s.seq);
  const Bf16Tensor q = random_bf16(n, gen), k = random_bf16(n, gen), v = random_bf16(n, gen),
                   d_o = random_bf16(n, gen);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<bf16> o(n), dk(n), dv(n);
  std::vector<float> lse(rows), delta(rows, 0.0f), dq(n, 0.0f);
  EXPECT_NO_THROW(launch_forward<D>(s, q, k, v, o, lse, scale)) << "D" << D;
  EXPECT_NO_THROW(launch_backward<D>(s, q, k, v, d_o, lse, delta, dq, dk, dv, scale)) << "D" << D;
  EXPECT_THROW(launch_forward<D>(s, q, k, v, o, lse, scale, {}, 16), simt::SimtError) << "D" << D;
  EXPECT_THROW(launch_backward<D>(s, q, k, v, d_o, lse, delta, dq, dk, dv, scale, {}, 16),
               simt::SimtError)
      << "D" << D;
}

TEST(Flash2Emulated, TheKernelsStayInTheSharedMemoryTheirLaunchersAskFor) {
  check_shared_bounds<64>();
  check_shared_bounds<128>();
}

}  // namespace
}  // namespace ppbench::cuda::fa2
