#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/gpu_placement.h"

namespace ppbench {
namespace {

std::string rejection(const GpuPlacementFlags& f) {
  try {
    plan_gpu_placement(f);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(GpuList, ParsesCommaSeparatedIds) {
  EXPECT_EQ(parse_gpu_list("0,1,2,3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_gpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(parse_gpu_list("3,1"), (std::vector<int>{3, 1}));
}

TEST(GpuList, NamesTheBadToken) {
  for (const char* bad : {"0,,1", "0,x", "", "0,1,", "1.5", " 1"}) {
    try {
      parse_gpu_list(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      const std::string why = e.what();
      EXPECT_TRUE(has(why, "--gpus")) << why;
      EXPECT_EQ(why.find('\n'), std::string::npos) << why;
    }
  }
  try {
    parse_gpu_list("0,x");
  } catch (const UsageError& e) {
    EXPECT_TRUE(has(e.what(), "'x'")) << e.what();
  }
  EXPECT_THROW(parse_gpu_list("-1"), UsageError);
}

TEST(GpuList, DuplicateSaysNcclCannotShareAGpuAndSuggestsVirtualDevices) {
  try {
    parse_gpu_list("0,1,1");
    FAIL();
  } catch (const UsageError& e) {
    const std::string why = e.what();
    EXPECT_TRUE(has(why, "GPU 1 is listed twice")) << why;
    EXPECT_TRUE(has(why, "NCCL does not allow two ranks on one GPU")) << why;
    EXPECT_TRUE(has(why, "--virtual-devices")) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
}

TEST(GpuPlacementPlan, OneRankPerListedGpu) {
  const GpuPlacement p = plan_gpu_placement({"2,3,0,1", std::nullopt, 0, 4, 4});
  EXPECT_EQ(p.kind, GpuPlacement::Kind::Gpus);
  EXPECT_EQ(p.ranks(), 4);
  EXPECT_EQ(p.device_of(0), 2);
  EXPECT_EQ(p.device_of(3), 1);
  EXPECT_EQ(describe(p), "GPUs 2,3,0,1 (NCCL)");
}

TEST(GpuPlacementPlan, RejectsCountDifferentFromDevices) {
  const std::string why = rejection({"0,1", std::nullopt, 0, 4, -1});
  EXPECT_TRUE(has(why, "lists 2 GPUs but --devices is 4")) << why;
}

TEST(GpuPlacementPlan, RejectsGpusTheNodeDoesNotShow) {
  const std::string why = rejection({"0,1,2,7", std::nullopt, 0, 4, 4});
  EXPECT_TRUE(has(why, "GPU 7 is not visible")) << why;
  EXPECT_TRUE(has(why, "0..3")) << why;
}

TEST(GpuPlacementPlan, VirtualDevicesSplitOneGpu) {
  const GpuPlacement p = plan_gpu_placement({std::nullopt, 4, 1, 4, 2});
  EXPECT_EQ(p.kind, GpuPlacement::Kind::VirtualDevices);
  EXPECT_EQ(p.ranks(), 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(p.device_of(r), 1);
  EXPECT_EQ(describe(p), "GPU 1 split into 4 virtual devices (green contexts)");
}

TEST(GpuPlacementPlan, RejectsBadVirtualDevices) {
  EXPECT_TRUE(has(rejection({std::nullopt, 0, 0, 1, -1}), "at least 1, got 0"));
  EXPECT_TRUE(has(rejection({std::nullopt, 2, 0, 4, -1}),
                  "--virtual-devices 2 differs from "
                  "--devices 4"));
  EXPECT_TRUE(has(rejection({"0,1", 2, 0, 2, -1}), "exclude each other"));
  EXPECT_TRUE(has(rejection({std::nullopt, 2, 3, 2, 2}), "GPU 3 is not visible"));
}

TEST(GpuPlacementPlan, NoFlagRunsOneRankOnGpuZeroOnly) {
  const GpuPlacement p = plan_gpu_placement({std::nullopt, std::nullopt, 0, 1, 1});
  EXPECT_EQ(p.ranks(), 1);
  EXPECT_EQ(describe(p), "GPU 0");
  const std::string why = rejection({std::nullopt, std::nullopt, 0, 4, -1});
  EXPECT_TRUE(has(why, "needs --gpus")) << why;
  EXPECT_TRUE(has(why, "--virtual-devices 4")) << why;
}

}  // namespace
}  // namespace ppbench
