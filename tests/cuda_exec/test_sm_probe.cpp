// Virtual devices are devices: a kernel that records %smid on each rank's stream sees disjoint
// sets of SMs, none larger than the rank's grant (harness/cuda/sm_probe.h), and every run on
// virtual devices records that. The judgement itself is host logic, tested here without a GPU.
#include <gtest/gtest.h>

#include "harness/cuda/cuda_run.h"
#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/sm_probe.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"

namespace ppbench::cuda {
namespace {

TEST(SmProbe, JudgesOverlapAndGrants) {
  SmProbeReport ok = judge_sm_probe({{0, 1, 2, 2}, {4, 3}}, {3, 2});
  EXPECT_TRUE(ok.disjoint);
  EXPECT_TRUE(ok.within_grant);
  EXPECT_EQ(ok.per_rank[0], (std::vector<int>{0, 1, 2}));
  EXPECT_NE(ok.summary.find("3/2"), std::string::npos) << ok.summary;
  SmProbeReport overlap = judge_sm_probe({{0, 1}, {1, 2}}, {2, 2});
  EXPECT_FALSE(overlap.disjoint);
  EXPECT_NE(overlap.summary.find("SM 1"), std::string::npos) << overlap.summary;
  SmProbeReport greedy = judge_sm_probe({{0, 1, 2}, {3}}, {2, 2});
  EXPECT_TRUE(greedy.disjoint);
  EXPECT_FALSE(greedy.within_grant);
}

TEST(SmProbe, EachVirtualDeviceRunsOnItsOwnSms) {
  std::string why;
  if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  for (int d : {2, 4, 8}) {
    GpuPlacement p;
    p.kind = GpuPlacement::Kind::VirtualDevices;
    p.gpus = {0};
    p.virtual_devices = d;
    auto devices = GpuDevices::open(p);
    std::vector<std::vector<int>> seen;
    std::vector<int> granted;
    for (int r = 0; r < d; ++r) {
      devices->rank(r).make_current();
      seen.push_back(sms_used(devices->rank(r).compute, 8 * devices->rank(r).sms));
      granted.push_back(devices->rank(r).sms);
      EXPECT_GT(seen.back().size(), 0u);
    }
    const SmProbeReport report = judge_sm_probe(seen, granted);
    EXPECT_TRUE(report.disjoint && report.within_grant) << "D=" << d << ": " << report.summary;
  }
}

TEST(SmProbe, RunsOnVirtualDevicesRecordTheProbe) {
  std::string why;
  if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  MlpConfig c;
  c.layers = 4, c.width = 32, c.input_dim = 16, c.classes = 5;
  CudaRunOptions o;
  o.run.schedule = {"1f1b", 2, 4, 0, 0};
  o.virtual_devices = 2;
  o.activation_arena_bytes = std::size_t{64} << 20;
  const RunOutput out = run_cuda(build_mlp(c, 4, ppbench::DType::kF32), o);
  const auto& probe = out.record["gpu"]["sm_probe"];
  EXPECT_TRUE(probe["disjoint"].get<bool>()) << probe.dump();
  EXPECT_TRUE(probe["within_grant"].get<bool>()) << probe.dump();
  EXPECT_EQ(probe["sms_seen_per_rank"].size(), 2u);
}

}  // namespace
}  // namespace ppbench::cuda
