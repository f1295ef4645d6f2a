// The cuBLASLt descriptors and chosen algorithm of each GEMM shape a rank has run, kept for the
// rank's lifetime: a step repeats the same few shapes many times, and building the descriptors
// and asking the heuristic on every call costs host microseconds per GEMM (tens for the
// heuristic) that the executor's per-action overhead would carry.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include <cublasLt.h>

#include "core/fnv1a.h"

namespace ppbench::cuda {

// Everything that decides a GEMM's descriptors and algorithm: m, n, k, the transposes, both
// types, bias or not, beta nonzero or not, the batch (count and three strides) and the SM target.
using GemmKey = std::array<std::int64_t, 14>;

struct GemmKeyHash {
  std::size_t operator()(const GemmKey& key) const noexcept {
    Fnv1a h;  // over the fields' 64-bit words
    for (const std::int64_t v : key) h.add_word(static_cast<std::uint64_t>(v));
    return static_cast<std::size_t>(h.value());
  }
};

// One shape's descriptors (destroyed with it) and its algorithm. The bias pointer is the only
// attribute that changes from call to call; gemm() sets it before each launch.
struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

using GemmPlans = std::unordered_map<GemmKey, std::unique_ptr<GemmPlan>, GemmKeyHash>;

}  // namespace ppbench::cuda
