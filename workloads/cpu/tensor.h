// Dense tensors, saved activations, parameters and their initialisation for the CPU kernels.
//
// Layout: row-major, last dimension fastest. Token tensors are [batch, seq, features] and images
// are NHWC [batch, height, width, channels], so every layer can view its input as a matrix
// [rows = numel / last, cols = last] (tokens x features, or pixels x channels) and hand it to one
// Eigen GEMM. Nothing here includes Eigen, so the executor compiles without it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "workloads/counter_rng.h"

namespace ppbench::cpu {

// Tensor storage aligned to 64 bytes (a cache line, an AVX-512 register).
// Eigen's vectorised GEMM peels a different number of leading elements for
// differently aligned buffers, which changes the rounding; with every buffer
// aligned alike, the same computation gives the same bits wherever it runs,
// which the bitwise-equality tests rely on.
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlignment)));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(kAlignment)); }
  friend bool operator==(const AlignedAllocator&, const AlignedAllocator&) { return true; }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

template <typename T>
struct Tensor {
  std::vector<std::int64_t> shape;
  AlignedVector<T> data;

  Tensor() = default;
  explicit Tensor(std::vector<std::int64_t> s, T fill = T(0))
      : shape(std::move(s)), data(static_cast<std::size_t>(count(shape)), fill) {}

  static std::int64_t count(const std::vector<std::int64_t>& s) {
    std::int64_t n = 1;
    for (std::int64_t d : s) n *= d;
    return n;
  }
  // Elements the shape describes (still known after release()).
  std::int64_t numel() const { return count(shape); }
  std::int64_t dim(int i) const {
    return shape[static_cast<std::size_t>(i < 0 ? i + static_cast<int>(shape.size()) : i)];
  }
  std::int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  std::int64_t rows() const { return numel() / cols(); }
  // Bytes actually held: what the activation arena counts.
  std::int64_t bytes() const { return static_cast<std::int64_t>(data.size() * sizeof(T)); }
  // Frees the buffer but keeps the shape.
  void release() { AlignedVector<T>().swap(data); }
};

// What one layer keeps for one micro-batch between its passes: F fills it, I shrinks it to what
// W needs, W empties it. Composite blocks keep one child Saved per sub-layer. Index tensors
// (token ids, targets, pooling arg-max) are stored as values of T: exact below 2^24.
template <typename T>
struct Saved {
  std::vector<std::int64_t> in_shape;  // shape of F's input (metadata, not counted)
  std::vector<Tensor<T>> t;            // the layer's own buffers, indexed by its slot enum
  std::vector<Saved<T>> sub;           // composite blocks: one per sub-layer, in forward order

  // Live bytes: exactly the sum of the buffers held, recursively.
  std::int64_t bytes() const {
    std::int64_t b = 0;
    for (const Tensor<T>& x : t) b += x.bytes();
    for (const Saved<T>& s : sub) b += s.bytes();
    return b;
  }
  void clear() {
    std::vector<Tensor<T>>().swap(t);
    std::vector<Saved<T>>().swap(sub);
  }
};

// A trainable tensor and its gradient accumulator (same shape; W passes add into grad).
template <typename T>
struct Param {
  std::string name;
  Tensor<T> value;
  Tensor<T> grad;

  void init(std::string n, std::vector<std::int64_t> shape) {
    name = std::move(n);
    value = Tensor<T>(shape);
    grad = Tensor<T>(std::move(shape));
  }
};

using ::ppbench::derive_seed;
using ::ppbench::param_key;

// Parameter initialisation shared with the CUDA layers (workloads/counter_rng.h): element i of
// the row-major tensor is a * draw_symmetric(key, i), rounded once to T, so float and double
// models built from one seed hold the same parameters up to rounding, and a GPU filling the same
// tensor in its own layout holds them bit for bit.
template <typename T>
void fill_symmetric(Tensor<T>& x, std::uint64_t key, double a) {
  for (std::size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = static_cast<T>(draw_symmetric(key, i, a));
}

// A stream of draws under one key, for test and benchmark data: the n-th draw is element n.
class Rng {
 public:
  explicit Rng(std::uint64_t key) : key_(key) {}
  double uniform() { return draw_unit(key_, next_++); }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  template <typename T>
  void fill(Tensor<T>& x, double lo, double hi) {
    for (T& v : x.data) v = static_cast<T>(uniform(lo, hi));
  }

 private:
  std::uint64_t key_;
  std::uint64_t next_ = 0;
};

}  // namespace ppbench::cpu
