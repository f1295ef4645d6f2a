// Device tensors, saved activations and parameters of the CUDA kernels: the GPU mirror of
// workloads/cpu/tensor.h. Row-major, last dimension fastest, so every layer views its input as a
// matrix [rows = numel / last, cols = last], as on the CPU.
//
// A DTensor shares its buffer (a block of a DeviceArena): saving the input of a layer for W is a
// reference, not a copy, and the block returns to its arena when the last reference goes. The
// arena must outlive its tensors. bytes() is what a Saved counts, as cpu::Tensor::bytes().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/cuda/arena.h"
#include "workloads/cuda/dtype.h"

namespace ppbench::cuda {

using Shape = std::vector<std::int64_t>;

inline std::int64_t shape_numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  return n;
}
std::string shape_text(const Shape& s);  // "[2, 3, 4]"

class DTensor {
 public:
  DTensor() = default;
  // Allocates numel * size(dtype) bytes from `arena`; `what` names it in out-of-memory errors.
  DTensor(DeviceArena& arena, Shape shape, DType dtype, const char* what = "tensor");
  // A shape-only tensor holding no memory (e.g. the "gradient" of token ids).
  static DTensor shape_only(Shape shape, DType dtype);

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return shape_numel(shape_); }
  std::int64_t dim(int i) const {
    return shape_[static_cast<std::size_t>(i < 0 ? i + static_cast<int>(shape_.size()) : i)];
  }
  std::int64_t cols() const { return shape_.empty() ? 1 : shape_.back(); }
  std::int64_t rows() const { return numel() / cols(); }
  bool empty() const { return block_ == nullptr; }
  // Whether another tensor (e.g. a Saved slot) refers to the same buffer.
  bool shared() const { return block_ != nullptr && block_.use_count() > 1; }

  void* data() const { return block_ ? block_->ptr : nullptr; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data());
  }
  // Bytes actually held (0 after release()).
  std::int64_t bytes() const {
    return block_ ? numel() * static_cast<std::int64_t>(dtype_size(dtype_)) : 0;
  }
  // Drops this reference to the buffer, keeping the shape.
  void release() { block_.reset(); }
  // Same buffer, other shape with the same element count.
  DTensor reshaped(Shape shape) const;

 private:
  struct Block {
    DeviceArena* arena;
    void* ptr;
    Block(DeviceArena* a, void* p) : arena(a), ptr(p) {}
    ~Block() { arena->free(ptr); }
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
  };
  Shape shape_;
  DType dtype_ = DType::kF32;
  std::shared_ptr<Block> block_;
};

// What one layer keeps for one micro-batch between F, I and W: see workloads/cpu/layer.h.
struct Saved {
  Shape in_shape;
  std::vector<DTensor> t;
  std::vector<Saved> sub;

  std::int64_t bytes() const {
    std::int64_t b = 0;
    for (const DTensor& x : t) b += x.bytes();
    for (const Saved& s : sub) b += s.bytes();
    return b;
  }
  void clear() {
    std::vector<DTensor>().swap(t);
    std::vector<Saved>().swap(sub);
  }
};

// A trainable tensor in the layer's dtype and its fp32 gradient accumulator (W passes add in).
struct Param {
  std::string name;
  DTensor value;
  DTensor grad;
  // The CPU backend holds this 2-D tensor transposed ([cols, rows]: Linear and Conv2d weights,
  // stored here as cuBLAS reads them): initialisation and comparisons map elements through it.
  bool transposed = false;
};

// Host <-> device copies with conversion (synchronous: for set-up and tests, not hot paths).
// Values are given and returned as float; ints are converted exactly below 2^24.
void upload(const DTensor& dst, const std::vector<float>& host);
std::vector<float> download(const DTensor& src);
// `t` (p.value or p.grad) in the CPU backend's layout: transposed back where p.transposed.
std::vector<float> download_cpu_layout(const Param& p, const DTensor& t);
// Zeroes the buffer on `stream`.
void zero(const DTensor& t, void* stream = nullptr);

}  // namespace ppbench::cuda
