// FNV-1a, 64 bits: a small, fixed hash whose value is the same in every process and build of one
// source (std::hash is neither promised nor seeded alike). Hashes the GEMM plans' keys
// (workloads/cuda/gemm_plans.h) and the fingerprint the processes of an MPI job compare
// (harness/mpi/launch_check.cpp). C++17: .cu files include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ppbench {

class Fnv1a {
 public:
  // One whole 64-bit word per step: a quarter of the work of its bytes, for keys of integers.
  void add_word(std::uint64_t word) { hash_ = (hash_ ^ word) * kPrime; }
  void add_bytes(std::string_view bytes) {
    add_word(bytes.size());  // so that "ab" + "c" and "a" + "bc" differ
    for (const char c : bytes) hash_ = (hash_ ^ static_cast<unsigned char>(c)) * kPrime;
  }
  std::uint64_t value() const { return hash_; }

 private:
  static constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace ppbench
