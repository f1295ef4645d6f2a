// Per-rank device memory arena: ONE cudaMalloc of a fixed size up front, then first-fit
// allocation from a free list with coalescing, so that a pipeline rank's memory behaviour is
// decided by the schedule, not by the CUDA caching allocator, and so that running out is a clear
// error instead of a crash. No managed memory.
//
// Accounting: the arena itself counts bytes in use (everything allocated from it: saved
// activations, outputs in flight, scratch) and their peak. "Live" activation bytes in the sense
// of the CPU backend (bytes held for later passes) are Saved::bytes() of the GPU layers, which sum
// exactly the buffers a layer keeps, like cpu::Saved::bytes(); the executor reports those into
// the harness's ActivationArena as the CPU executor does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "workloads/cuda/check.h"

namespace ppbench::cuda {

// Raised when an allocation does not fit: names the arena, the stage/action being run and the
// bytes asked for. The device's limit, as a failed cudaMalloc is.
class ArenaOutOfMemory : public DeviceOutOfMemory {
 public:
  using DeviceOutOfMemory::DeviceOutOfMemory;
};

// The bookkeeping, on offsets only: host code, testable without a GPU.
class ArenaPlan {
 public:
  static constexpr std::size_t kAlign = 256;  // cuBLASLt and vector loads want aligned pointers

  explicit ArenaPlan(std::size_t capacity);
  // Offset of a block of at least `bytes` (rounded up to kAlign), or kNone if none fits.
  static constexpr std::size_t kNone = ~std::size_t{0};
  std::size_t allocate(std::size_t bytes);
  void free(std::size_t offset);

  std::size_t capacity() const { return capacity_; }
  std::size_t in_use() const { return in_use_; }
  std::size_t peak() const { return peak_; }
  void reset_peak() { peak_ = in_use_; }
  std::size_t largest_free() const;
  std::size_t blocks() const { return used_.size(); }

  static std::size_t round_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

 private:
  std::size_t capacity_;
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
  std::map<std::size_t, std::size_t> free_;  // offset -> size, coalesced
  std::map<std::size_t, std::size_t> used_;  // offset -> size
};

class DeviceArena {
 public:
  // cudaMalloc(bytes) once; `label` names the owner in errors (e.g. "rank 2").
  DeviceArena(std::string label, std::size_t bytes);
  // Over memory someone else owns (tests on fake pointers, sub-arenas): never freed here.
  static DeviceArena over(void* base, std::size_t bytes, std::string label);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // What is running now, for out-of-memory messages (the executor sets e.g. "stage 3 F mb 1").
  void set_scope(std::string scope) { scope_ = std::move(scope); }
  const std::string& scope() const { return scope_; }

  // Throws ArenaOutOfMemory naming the scope, `what` and the bytes asked for. bytes == 0 gives
  // nullptr.
  void* allocate(std::size_t bytes, const char* what);
  void free(void* p);

  std::size_t capacity() const { return plan_.capacity(); }
  std::size_t in_use() const { return plan_.in_use(); }
  std::size_t peak() const { return plan_.peak(); }
  void reset_peak() { plan_.reset_peak(); }
  const std::string& label() const { return label_; }

 private:
  DeviceArena(void* base, std::size_t bytes, std::string label, bool owns);
  char* base_;
  ArenaPlan plan_;
  std::string label_;
  std::string scope_;
  bool owns_;
};

}  // namespace ppbench::cuda
