#include "workloads/cuda/arena.h"

#include <iterator>

namespace ppbench::cuda {

ArenaPlan::ArenaPlan(std::size_t capacity) : capacity_(capacity / kAlign * kAlign) {
  if (capacity_ > 0) free_[0] = capacity_;
}

std::size_t ArenaPlan::allocate(std::size_t bytes) {
  const std::size_t need = round_up(bytes == 0 ? 1 : bytes);
  // First fit: activations of one step are mostly freed in reverse order, which keeps the low
  // end dense without a best-fit search.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const std::size_t off = it->first, left = it->second - need;
    free_.erase(it);
    if (left > 0) free_[off + need] = left;
    used_[off] = need;
    in_use_ += need;
    if (in_use_ > peak_) peak_ = in_use_;
    return off;
  }
  return kNone;
}

void ArenaPlan::free(std::size_t offset) {
  auto u = used_.find(offset);
  require(u != used_.end(), "arena: free of a block that was not allocated");
  std::size_t off = offset, size = u->second;
  used_.erase(u);
  in_use_ -= size;
  auto next = free_.lower_bound(off);
  if (next != free_.end() && off + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += size;
      return;
    }
  }
  free_[off] = size;
}

std::size_t ArenaPlan::largest_free() const {
  std::size_t m = 0;
  for (const auto& [off, size] : free_) m = size > m ? size : m;
  return m;
}

DeviceArena::DeviceArena(void* base, std::size_t bytes, std::string label, bool owns)
    : base_(static_cast<char*>(base)), plan_(bytes), label_(std::move(label)), owns_(owns) {}

DeviceArena::DeviceArena(std::string label, std::size_t bytes)
    : base_(nullptr), plan_(bytes), label_(std::move(label)), owns_(true) {
  if (bytes == 0) return;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, plan_.capacity());
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: the next launch's check must not find it
    throw ArenaOutOfMemory("cuda arena '" + label_ + "': cannot reserve " +
                           std::to_string(plan_.capacity()) + " bytes of device memory up front");
  }
  CUDA_CHECK(e);
  base_ = static_cast<char*>(p);
}

DeviceArena DeviceArena::over(void* base, std::size_t bytes, std::string label) {
  return DeviceArena(base, bytes, std::move(label), false);
}

DeviceArena::~DeviceArena() {
  if (owns_ && base_ != nullptr) cudaFree(base_);  // no throw from a destructor
}

void* DeviceArena::allocate(std::size_t bytes, const char* what) {
  if (bytes == 0) return nullptr;
  const std::size_t off = plan_.allocate(bytes);
  if (off == ArenaPlan::kNone) {
    throw ArenaOutOfMemory(
        "cuda arena '" + label_ + "': out of device memory" +
        (scope_.empty() ? std::string() : " in " + scope_) + ": " + what + " asked for " +
        std::to_string(bytes) + " bytes; " + std::to_string(plan_.in_use()) + " of " +
        std::to_string(plan_.capacity()) + " bytes in use, largest free block " +
        std::to_string(plan_.largest_free()) + " bytes (raise the arena size or lower the " +
        "micro-batch / in-flight micro-batches)");
  }
  return base_ + off;
}

void DeviceArena::free(void* p) {
  if (p == nullptr) return;
  plan_.free(static_cast<std::size_t>(static_cast<char*>(p) - base_));
}

}  // namespace ppbench::cuda
