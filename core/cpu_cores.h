// What the CPU gives this process's threads: how many cores they may run on, and how much CPU
// time the calling thread has had.
//
// Rank threads that outnumber the cores share them, and an action's wall time then includes the
// slices other ranks ran in: the CPU executor measures the threads' CPU time instead (harness/
// executor/cpu_executor.h), from which the replay rebuilds the step on that many cores.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif
#include <time.h>

namespace ppbench {

// The cores this process may run on: its CPU affinity mask (taskset, cgroups' cpusets, a batch
// system's binding), else what the hardware reports; at least 1.
inline int available_cores() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

// The CPUs this process may run on as a bitmap (bit i of byte i / 8: CPU i), for a union across
// processes (processes of one node bound to different cores, or sharing them); where the mask
// cannot be read, the first available_cores() CPUs.
using CpuMask = std::array<std::uint8_t, 128>;  // 1024 CPUs, glibc's CPU_SETSIZE
inline CpuMask available_cpu_mask() {
  CpuMask mask{};
  const int cpus = static_cast<int>(mask.size()) * 8;
  auto set_cpu = [&mask](int c) {
    mask[static_cast<std::size_t>(c / 8)] |= std::uint8_t(1u << (c % 8));
  };
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    for (int c = 0; c < cpus; ++c)
      if (CPU_ISSET(c, &set)) set_cpu(c);
    return mask;
  }
#endif
  for (int c = 0; c < std::min(available_cores(), cpus); ++c) set_cpu(c);
  return mask;
}
inline int cpus_in(const CpuMask& mask) {
  int n = 0;
  for (std::uint8_t b : mask) n += std::popcount(b);
  return n;
}

// The CPUs of a mask, lowest first.
inline std::vector<int> cpus_of(const CpuMask& mask) {
  std::vector<int> cpus;
  for (int c = 0; c < static_cast<int>(mask.size()) * 8; ++c)
    if (mask[static_cast<std::size_t>(c / 8)] & (1u << (c % 8))) cpus.push_back(c);
  return cpus;
}

// Binds the calling thread to one CPU; false where the system refuses or cannot (then the thread
// runs where it did). Rank threads left to the scheduler are at times stacked on one core and
// moved between cores mid-step, which makes a step's wall time jump by tens of percent.
inline bool pin_calling_thread(int cpu) {
#if defined(__linux__)
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
#else
  (void)cpu;
  return false;
#endif
}

// Seconds of CPU time the calling thread has used (user and system), 0 where the clock is
// missing.
inline double thread_cpu_seconds() {
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The calling thread's CPU time since construction, where it is asked for (`on`); -1 where it is
// not, the trace's "not measured". Off, it reads no clock: a syscall per reading is worth paying
// only where ranks share cores.
class ThreadCpuTimer {
 public:
  explicit ThreadCpuTimer(bool on) : on_(on), begin_(on ? thread_cpu_seconds() : 0) {}
  double seconds() const { return on_ ? thread_cpu_seconds() - begin_ : -1.0; }

 private:
  bool on_;
  double begin_;
};

}  // namespace ppbench
