#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/sm_partition.h"

namespace ppbench {
namespace {

// H100 SXM and H200 both have 132 SMs; Hopper splits in multiples of 8, at least 8.
constexpr int kH100Sms = 132;
constexpr int kH200Sms = 132;

std::string rejection(int sms, SmGranularity g, int d, int k = 0) {
  try {
    plan_sm_partitions(sms, g, d, k);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(SmPartition, HopperSplitsLeaveTheRemainderIdle) {
  struct Case {
    int d, k, idle;
  };
  for (int sms : {kH100Sms, kH200Sms})
    for (const Case c : {Case{1, 128, 4}, Case{2, 64, 4}, Case{3, 40, 12}, Case{4, 32, 4},
                         Case{8, 16, 4}, Case{16, 8, 4}}) {
      const SmPartitionPlan p = plan_sm_partitions(sms, kHopperGranularity, c.d);
      EXPECT_EQ(p.partitions, c.d);
      EXPECT_EQ(p.sms_per_partition, c.k) << "D=" << c.d;
      EXPECT_EQ(p.idle_sms, c.idle) << "D=" << c.d;
      EXPECT_EQ(p.partitions * p.sms_per_partition + p.idle_sms, sms);
      EXPECT_EQ(p.sms_per_partition % kHopperGranularity.alignment, 0);
    }
}

TEST(SmPartition, TooManyPartitionsSaysHowManyFit) {
  const std::string why = rejection(kH100Sms, kHopperGranularity, 17);
  EXPECT_NE(why.find("17 virtual devices of at least 8 SMs each need 136 SMs"), std::string::npos)
      << why;
  EXPECT_NE(why.find("at most 16 partitions"), std::string::npos) << why;
}

TEST(SmPartition, RequestedSizeForScalingComparison) {
  // One partition of 16 SMs against eight of 16: the same k both ways.
  const SmPartitionPlan one = plan_sm_partitions(kH100Sms, kHopperGranularity, 1, 16);
  const SmPartitionPlan eight = plan_sm_partitions(kH100Sms, kHopperGranularity, 8, 16);
  EXPECT_EQ(one.sms_per_partition, 16);
  EXPECT_EQ(one.idle_sms, 116);
  EXPECT_EQ(eight.sms_per_partition, 16);
  EXPECT_EQ(eight.idle_sms, 4);
  EXPECT_NE(rejection(kH100Sms, kHopperGranularity, 4, 12).find("multiple of 8"),
            std::string::npos);
  EXPECT_NE(rejection(kH100Sms, kHopperGranularity, 4, 40).find("at most 32 SMs each"),
            std::string::npos);
}

TEST(SmPartition, GranularityIsAnInput) {
  // A finer granularity (e.g. with SM co-scheduling ignored): 2 SMs, multiples of 2.
  const SmPartitionPlan p = plan_sm_partitions(kH100Sms, {2, 2}, 8);
  EXPECT_EQ(p.sms_per_partition, 16);
  EXPECT_EQ(p.idle_sms, 4);
  const SmPartitionPlan q = plan_sm_partitions(kH100Sms, {2, 2}, 5);
  EXPECT_EQ(q.sms_per_partition, 26);
  EXPECT_EQ(q.idle_sms, 2);
  // A minimum that is not a multiple of the alignment rounds up to the next legal size.
  const SmPartitionPlan r = plan_sm_partitions(20, {5, 4}, 2);
  EXPECT_EQ(r.sms_per_partition, 8);
  EXPECT_NE(rejection(20, {5, 4}, 3).find("at least 8 SMs"), std::string::npos);
}

TEST(SmPartition, RejectsNonsense) {
  EXPECT_NE(rejection(0, kHopperGranularity, 2).find("SM count"), std::string::npos);
  EXPECT_NE(rejection(kH100Sms, {0, 8}, 2).find("granularity"), std::string::npos);
  EXPECT_NE(rejection(kH100Sms, kHopperGranularity, 0).find("--virtual-devices"),
            std::string::npos);
  // A GPU smaller than one minimum partition.
  EXPECT_NE(rejection(6, kHopperGranularity, 1).find("this GPU has 6"), std::string::npos);
}

TEST(SmPartition, ShrinksByTheAlignmentDownToTheSmallestSize) {
  // The driver may cut fewer than D groups of k SMs; the executor then asks for k - alignment.
  SmPartitionPlan p = plan_sm_partitions(kH100Sms, kHopperGranularity, 2);
  ASSERT_EQ(p.sms_per_partition, 64);
  ASSERT_TRUE(shrink_partitions(p, kHopperGranularity));
  EXPECT_EQ(p.sms_per_partition, 56);
  EXPECT_EQ(p.idle_sms, kH100Sms - 2 * 56);
  EXPECT_EQ(p.partitions, 2);
  int steps = 1;
  while (shrink_partitions(p, kHopperGranularity)) ++steps;
  EXPECT_EQ(steps, 7);  // 56, 48, ..., 8
  EXPECT_EQ(p.sms_per_partition, 8);
  EXPECT_EQ(p.idle_sms, kH100Sms - 16);
  // A minimum that is not a multiple of the alignment: never below the rounded-up minimum.
  SmPartitionPlan q = plan_sm_partitions(20, {5, 4}, 2);
  ASSERT_EQ(q.sms_per_partition, 8);
  EXPECT_FALSE(shrink_partitions(q, {5, 4}));
  EXPECT_EQ(q.sms_per_partition, 8);
}

TEST(SmGrant, ExactGrantIsReportedAsRequested) {
  const SmPartitionPlan p = plan_sm_partitions(kH200Sms, kHopperGranularity, 4);
  const SmGrantReport r = compare_grant(p, {32, 32, 32, 32});
  EXPECT_TRUE(r.as_requested);
  EXPECT_EQ(r.missing_partitions, 0);
  EXPECT_EQ(r.difference, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(r.summary, "granted 4 partitions of 32 SMs as requested (4 of 132 SMs idle)");
}

TEST(SmGrant, ReportsFewerAndDifferentPartitions) {
  const SmPartitionPlan p = plan_sm_partitions(kH100Sms, kHopperGranularity, 4);
  const SmGrantReport fewer = compare_grant(p, {32, 32, 32});
  EXPECT_FALSE(fewer.as_requested);
  EXPECT_EQ(fewer.missing_partitions, 1);
  EXPECT_NE(fewer.summary.find("driver granted 3 partitions"), std::string::npos) << fewer.summary;
  const SmGrantReport smaller = compare_grant(p, {32, 24, 32, 40});
  EXPECT_FALSE(smaller.as_requested);
  EXPECT_EQ(smaller.difference, (std::vector<int>{0, -8, 0, 8}));
  EXPECT_NE(smaller.summary.find("partition 1 got 24 SMs (-8)"), std::string::npos)
      << smaller.summary;
  EXPECT_NE(smaller.summary.find("partition 3 got 40 SMs (+8)"), std::string::npos)
      << smaller.summary;
}

}  // namespace
}  // namespace ppbench
