// Maps the malloc heap's next pages in one system call, before a short command fills them.
//
// A process that touches fresh memory takes a page fault per 4 KiB page on first touch: about a
// microsecond each on a virtual machine, where `simulate` of a 130k-action schedule (3.5 MB)
// spent a sixth of its whole run in them. Asking the kernel to populate the range up front
// (MADV_POPULATE_WRITE, Linux 5.14) costs about half as much per page. With glibc, a block
// allocated, populated and freed stays at the top of the heap, and the allocations that follow
// are carved from its pages, provided that glibc neither gives it back (M_TRIM_THRESHOLD) nor
// serves the large ones from their own mappings (M_MMAP_THRESHOLD), which both calls set here.
//
// For one-shot commands only: the thresholds stay set for the life of the process. Elsewhere
// (another libc, an older kernel, a failed allocation) it does nothing, and the work faults its
// pages in as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#endif

namespace ppbench {

// glibc caps M_MMAP_THRESHOLD at 32 MiB on 64-bit systems: requests from there up get mappings
// of their own (LargeBuffer asks transparent huge pages for those). The prefaulted block must
// stay below it to come from the heap, so the prefault stops at half.
inline constexpr std::size_t kMmapThreshold = std::size_t{32} << 20;
inline constexpr std::size_t kMaxHeapPrefault = kMmapThreshold / 2;

// Returns whether the kernel populated a block (false: too small to bother, not glibc on Linux,
// or a kernel without MADV_POPULATE_WRITE).
inline bool prefault_heap(std::size_t bytes) {
#if defined(__linux__) && defined(__GLIBC__)
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE, absent from older headers
  constexpr std::uintptr_t kPage = 4096;
  if (bytes > kMaxHeapPrefault) bytes = kMaxHeapPrefault;
  if (bytes < 16 * kPage) return false;  // a few faults cost less than the calls
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMmapThreshold));
  void* block = std::malloc(bytes);
  if (!block) return false;
  const auto first = (reinterpret_cast<std::uintptr_t>(block) + kPage - 1) & ~(kPage - 1);
  const auto last = (reinterpret_cast<std::uintptr_t>(block) + bytes) & ~(kPage - 1);
  // Advice only: EINVAL on kernels before 5.14 leaves the pages to fault as usual.
  const bool populated =
      last > first && madvise(reinterpret_cast<void*>(first), last - first, kPopulateWrite) == 0;
  std::free(block);
  return populated;
#else
  (void)bytes;
  return false;
#endif
}

}  // namespace ppbench
