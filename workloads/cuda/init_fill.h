// Parameters and synthetic data drawn on the device: the same values the CPU backend draws on the
// host (workloads/counter_rng.h, workloads/synthetic_data.h), bit for bit, in milliseconds. Each
// call runs on the default stream and waits for it, as the other set-up calls do (the ranks'
// non-blocking streams do not wait for the default stream).
#pragma once

#include <cstdint>

#include "workloads/cuda/tensor.h"
#include "workloads/synthetic_data.h"

namespace ppbench::cuda {

// p.value[element] = a * draw_symmetric(key, canonical index), rounded to its dtype, where the
// canonical index is the element's row-major position in the CPU backend's layout: the same
// position when the layouts agree, and for p.transposed (the CPU holds [cols, rows] of the GPU's
// [rows, cols]) the transposed one.
void fill_param(const Param& p, std::uint64_t key, double a);

// Micro-batch data: features or NHWC images in x's dtype; token ids (int32) [b, seq]; next-token
// targets (int32) [b * seq]; class labels (int32) [b].
void fill_features(const DTensor& x, const DataKeys& keys);
void fill_tokens(const DTensor& ids, const DataKeys& keys, std::uint32_t vocab);
void fill_next_tokens(const DTensor& targets, const DataKeys& keys, std::int64_t seq,
                      std::uint32_t vocab);
void fill_labels(const DTensor& targets, const DataKeys& keys, std::uint32_t classes);

}  // namespace ppbench::cuda
