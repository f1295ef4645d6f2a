// The synthetic data of every run, as functions of (run seed, micro-batch, element) that the CPU
// backend evaluates in a loop and the CUDA backend in a kernel (workloads/counter_rng.h), so both
// train on the same micro-batches without the host drawing or uploading them.
//
//   features and images: uniform in [-1, 1), row-major ([b, features] or NHWC);
//   token ids:           uniform in [0, vocab) at (row, position);
//   next-token targets:  the input shifted by one, a fresh token at the end of each row;
//   class labels:        uniform in [0, classes) per sample.
#pragma once

#include <cstdint>

#include "workloads/counter_rng.h"

namespace ppbench {

struct DataKeys {
  std::uint64_t inputs = 0, targets = 0;
};

PPBENCH_HOST_DEVICE inline DataKeys data_keys(std::uint64_t seed, int microbatch) {
  const std::uint64_t mb = derive_seed(seed ^ 0xda7aULL, static_cast<std::uint64_t>(microbatch));
  return {derive_seed(mb, 0), derive_seed(mb, 1)};
}

PPBENCH_HOST_DEVICE inline double data_feature(const DataKeys& k, std::uint64_t element) {
  return draw_symmetric(k.inputs, element);
}

PPBENCH_HOST_DEVICE inline std::int32_t data_token(const DataKeys& k, std::int64_t row,
                                                   std::int64_t pos, std::int64_t seq,
                                                   std::uint32_t vocab) {
  return draw_below(k.inputs, static_cast<std::uint64_t>(row * seq + pos), vocab);
}

PPBENCH_HOST_DEVICE inline std::int32_t data_next_token(const DataKeys& k, std::int64_t row,
                                                        std::int64_t pos, std::int64_t seq,
                                                        std::uint32_t vocab) {
  return pos + 1 < seq ? data_token(k, row, pos + 1, seq, vocab)
                       : draw_below(k.targets, static_cast<std::uint64_t>(row), vocab);
}

PPBENCH_HOST_DEVICE inline std::int32_t data_label(const DataKeys& k, std::int64_t sample,
                                                   std::uint32_t classes) {
  return draw_below(k.targets, static_cast<std::uint64_t>(sample), classes);
}

}  // namespace ppbench
