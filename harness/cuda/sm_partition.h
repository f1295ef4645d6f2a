// Green-context partition arithmetic: how D equal, disjoint SM partitions are cut from one GPU.
//
// The driver does not split at SM granularity. cuDevSmResourceSplitByCount rounds each group to
// the resource's `minSmPartitionSize` and `smCoscheduledAlignment` (cuDeviceGetDevResource
// reports both); on Hopper (H100 / H200, 132 SMs) both are 8, so a partition is 8, 16, 24, ...
// SMs. The granularity is an input here so that the arithmetic can be planned and tested without
// a GPU and stays right on architectures whose figures differ; the executor passes what the
// driver reports. What does not divide evenly is left idle rather than given to one partition,
// because unequal partitions would make the pipeline stages unequal and the scaling figure
// (D partitions of k SMs against one partition of k SMs) meaningless.
#pragma once

#include <string>
#include <vector>

namespace ppbench {

struct SmGranularity {
  int min_partition_sms = 8;  // CUdevSmResource::minSmPartitionSize
  int alignment = 8;          // CUdevSmResource::smCoscheduledAlignment
};

// Hopper's figures (compute capability 9.0, H100 and H200), as the driver reports them without
// CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING.
inline constexpr SmGranularity kHopperGranularity{8, 8};

struct SmPartitionPlan {
  int total_sms = 0;          // SMs of the GPU
  int partitions = 0;         // D
  int sms_per_partition = 0;  // k: the minCount passed to the split call
  int idle_sms = 0;           // total - D * k: the split's remainder, left unused
};

// D partitions of as many SMs as fit (requested_sms == 0), or of exactly `requested_sms` SMs
// (to compare D partitions of k SMs with one of k). Throws UsageError when the granularity is
// invalid, when requested_sms is not a valid partition size, or when D partitions of the
// minimum size do not fit on the GPU.
SmPartitionPlan plan_sm_partitions(int total_sms, SmGranularity g, int partitions,
                                   int requested_sms = 0);

// The plan with the next smaller legal partition size (k minus the alignment), or false when k
// is already the smallest. cuDevSmResourceSplitByCount may create fewer groups than the SM count
// divided by minCount ("due to cluster requirements or alignment and granularity requirements",
// cuda.h), so a k that fits arithmetically is not always one the driver can cut D times; the
// executor steps down until the split yields D groups.
bool shrink_partitions(SmPartitionPlan& plan, SmGranularity g);

// What the driver granted against the plan: the split may return fewer groups, or groups of a
// different size, than asked for.
struct SmGrantReport {
  bool as_requested = true;
  std::vector<int> granted_sms;  // per partition, as the driver reported
  std::vector<int> difference;   // granted - requested, per granted partition
  int missing_partitions = 0;    // requested - granted (negative: more than asked)
  std::string summary;           // one line for the run record and the log
};

SmGrantReport compare_grant(const SmPartitionPlan& plan, const std::vector<int>& granted_sms);

}  // namespace ppbench
