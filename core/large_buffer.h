// An array for large working sets (the walks' per-task state: the simulator's end times, 8 bytes
// per task, the validator's and the walk's flags, one byte per task; tens of MB for big
// schedules), uninitialised unless a fill value is given, backed by transparent huge pages where
// the kernel offers them on request (THP "madvise" mode, the common default): first touches then
// fault once per 2 MiB instead of once per 4 KiB page. Elsewhere it is an ordinary allocation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ppbench {

template <class T>
class LargeBuffer {
 public:
  explicit LargeBuffer(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= kHugePage) {
      // aligned_alloc wants a size that is a multiple of the alignment.
      const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
      data_ = static_cast<T*>(std::aligned_alloc(kHugePage, rounded));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
      if (data_) madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
    } else {
      data_ = static_cast<T*>(std::malloc(bytes == 0 ? 1 : bytes));
    }
    if (!data_) throw std::bad_alloc();
  }
  LargeBuffer(std::size_t n, T fill) : LargeBuffer(n) { std::fill_n(data_, n, fill); }
  ~LargeBuffer() { std::free(data_); }
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  T* get() const { return data_; }
  T& operator[](std::size_t i) const { return data_[i]; }

 private:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  T* data_ = nullptr;
};

}  // namespace ppbench
