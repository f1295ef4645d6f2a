#include "harness/cuda/sm_partition.h"

#include "core/error.h"

namespace ppbench {

namespace {

std::string str(int x) { return std::to_string(x); }

// The smallest legal size: the minimum rounded up to the alignment.
int smallest_partition(SmGranularity g) {
  return (g.min_partition_sms + g.alignment - 1) / g.alignment * g.alignment;
}

}  // namespace

SmPartitionPlan plan_sm_partitions(int total_sms, SmGranularity g, int partitions,
                                   int requested_sms) {
  if (total_sms < 1) throw UsageError("GPU SM count must be positive, got " + str(total_sms));
  if (g.min_partition_sms < 1 || g.alignment < 1)
    throw UsageError("SM partition granularity must be positive, got minimum " +
                     str(g.min_partition_sms) + " and alignment " + str(g.alignment));
  if (partitions < 1)
    throw UsageError("--virtual-devices must be at least 1, got " + str(partitions));
  const int smallest = smallest_partition(g);
  if (partitions * smallest > total_sms)
    throw UsageError(str(partitions) + " virtual devices of at least " + str(smallest) +
                     " SMs each need " + str(partitions * smallest) + " SMs; this GPU has " +
                     str(total_sms) + " (at most " + str(total_sms / smallest) + " partitions)");
  int k = total_sms / partitions / g.alignment * g.alignment;
  if (requested_sms != 0) {
    if (requested_sms < smallest || requested_sms % g.alignment != 0)
      throw UsageError("a partition of " + str(requested_sms) + " SMs is not allowed here: at " +
                       "least " + str(smallest) + " and a multiple of " + str(g.alignment));
    if (requested_sms > k)
      throw UsageError(str(partitions) + " partitions of " + str(requested_sms) + " SMs need " +
                       str(partitions * requested_sms) + " SMs; this GPU has " + str(total_sms) +
                       " (at most " + str(k) + " SMs each)");
    k = requested_sms;
  }
  return {total_sms, partitions, k, total_sms - partitions * k};
}

bool shrink_partitions(SmPartitionPlan& plan, SmGranularity g) {
  const int k = plan.sms_per_partition - g.alignment;
  if (k < smallest_partition(g)) return false;
  plan.sms_per_partition = k;
  plan.idle_sms = plan.total_sms - plan.partitions * k;
  return true;
}

SmGrantReport compare_grant(const SmPartitionPlan& plan, const std::vector<int>& granted_sms) {
  SmGrantReport r;
  r.granted_sms = granted_sms;
  r.missing_partitions = plan.partitions - static_cast<int>(granted_sms.size());
  std::string details;
  for (std::size_t i = 0; i < granted_sms.size(); ++i) {
    const int diff = granted_sms[i] - plan.sms_per_partition;
    r.difference.push_back(diff);
    if (diff != 0)
      details += "; partition " + std::to_string(i) + " got " + str(granted_sms[i]) + " SMs (" +
                 (diff > 0 ? "+" : "") + str(diff) + ")";
  }
  r.as_requested = r.missing_partitions == 0 && details.empty();
  const std::string asked =
      str(plan.partitions) + " partitions of " + str(plan.sms_per_partition) + " SMs";
  if (r.as_requested) {
    r.summary = "granted " + asked + " as requested (" + str(plan.idle_sms) + " of " +
                str(plan.total_sms) + " SMs idle)";
    return r;
  }
  r.summary = "requested " + asked + ", driver granted " +
              str(static_cast<int>(granted_sms.size())) + " partition" +
              (granted_sms.size() == 1 ? "" : "s") + details;
  return r;
}

}  // namespace ppbench
