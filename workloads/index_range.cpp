#include "workloads/index_range.h"

#include "core/error.h"

namespace ppbench {

IndexRange index_range(const WorkloadSpec& spec) {
  if (spec.workload == "transformer")
    return {"--vocab", "token ids and next-token targets", spec.layers.front().attrs.at("vocab")};
  const auto& last = spec.layers.back().attrs;
  return {"--classes", "class targets",
          last.count("classes") ? last.at("classes") : last.at("out")};
}

std::string index_range_refusal(const IndexRange& r, std::string_view where, std::string_view why,
                                std::int64_t most, std::string_view advice) {
  return r.flag + " " + std::to_string(r.count) + " is too large for " + std::string(where) + ": " +
         std::string(why) + ", so " + r.flag + " may be at most " + std::to_string(most) +
         std::string(advice);
}

void require_int32_indices(const WorkloadSpec& spec, std::string_view backend) {
  const IndexRange r = index_range(spec);
  if (r.count <= kMaxInt32IndexCount) return;
  throw UsageError(index_range_refusal(r, "the " + std::string(backend) + " backend",
                                       "it keeps " + r.what + " as int32", kMaxInt32IndexCount));
}

}  // namespace ppbench
