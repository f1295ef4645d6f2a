// The ids a workload draws: token ids and next-token targets (transformer, below --vocab) or
// class targets (mlp, amoebanet, below --classes). Both backends keep them as int32, so a count
// past 2^31 cannot be run on either; the CPU kernels also hold them as values of the run's dtype
// (harness/backends/cpu/model_builder.h), a tighter bound at f32.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "workloads/layer_spec.h"

namespace ppbench {

struct IndexRange {
  std::string flag;        // "--vocab" or "--classes"
  std::string what;        // "token ids and next-token targets" or "class targets"
  std::int64_t count = 0;  // the ids run 0 .. count - 1
};

IndexRange index_range(const WorkloadSpec& spec);

// Ids 0 .. 2^31 - 1 are every value an int32 id can take.
inline constexpr std::int64_t kMaxInt32IndexCount = std::int64_t{1} << 31;

// The refusal of a count past `most`: "<flag> <count> is too large for <where>: <why>, so
// <flag> may be at most <most><advice>". One form, so the backends' refusals read alike.
std::string index_range_refusal(const IndexRange& r, std::string_view where, std::string_view why,
                                std::int64_t most, std::string_view advice = "");

// UsageError when the spec's ids do not fit int32 (`backend`: "CPU" or "CUDA"): called before
// anything is allocated, since the data and the heads would be drawn with truncated bounds.
void require_int32_indices(const WorkloadSpec& spec, std::string_view backend);

}  // namespace ppbench
