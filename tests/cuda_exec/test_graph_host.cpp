// What `--cuda-graph` decides on the host, without a GPU: which placements it takes (NCCL only;
// the copy transport refuses, in one line naming the flag to use), how many eager steps come
// before the capture, the step time of a replay, and the record's `gpu.cuda_graph` object.
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/cuda_run.h"
#include "harness/cuda/gpu_transport.h"
#include "harness/cuda/graph_record.h"
#include "harness/cuda/transport_factory.h"
#include "workloads/mlp.h"

namespace ppbench {
namespace {

WorkloadSpec tiny_mlp() {
  MlpConfig c;
  c.layers = 4, c.width = 16, c.input_dim = 8, c.classes = 3;
  return build_mlp(c, 2, DType::kF32);
}

std::string refusal(const CudaRunOptions& o) {
  try {
    check_cuda_run_options(tiny_mlp(), o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaGraphHost, TakesGpusAndTheSingleRankDefault) {
  CudaRunOptions o;
  o.run.schedule = {"1f1b", 2, 4, 0, 0};
  o.cuda_graph = true;
  o.gpus = "0,1";
  EXPECT_EQ(refusal(o), "");
  CudaRunOptions one = o;
  one.run.schedule = {"gpipe", 1, 4, 0, 0};
  one.gpus.reset();
  EXPECT_EQ(refusal(one), "");
}

TEST(CudaGraphHost, RefusesVirtualDevicesInOneLine) {
  CudaRunOptions o;
  o.run.schedule = {"1f1b", 2, 4, 0, 0};
  o.cuda_graph = true;
  o.virtual_devices = 2;
  const std::string why = refusal(o);
  EXPECT_NE(why.find("--cuda-graph"), std::string::npos) << why;
  EXPECT_NE(why.find("--gpus"), std::string::npos) << why;
  EXPECT_NE(why.find("--virtual-devices"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  // The same reason from the transport itself (the executor asks it before capturing).
  auto copies = cuda::make_copy_transport(2, std::nullopt);
  std::string from_transport;
  EXPECT_FALSE(copies->capturable(&from_transport));
  EXPECT_EQ(from_transport, why);
}

TEST(CudaGraphHost, AtLeastOneEagerStepBeforeTheCapture) {
  EXPECT_EQ(cuda::eager_steps_before_capture(0), 1);
  EXPECT_EQ(cuda::eager_steps_before_capture(1), 1);
  EXPECT_EQ(cuda::eager_steps_before_capture(3), 3);
}

TEST(CudaGraphHost, StepTimeIsFirstLaunchToLastCompletion) {
  // Rank 1 launches 2 ms after rank 0 and finishes last.
  EXPECT_NEAR(cuda::graph_step_seconds({100.000, 100.002}, {0.010, 0.009}), 0.011, 1e-12);
  EXPECT_NEAR(cuda::graph_step_seconds({5.0}, {0.25}), 0.25, 1e-12);
  EXPECT_THROW(cuda::graph_step_seconds({}, {}), std::invalid_argument);
  EXPECT_THROW(cuda::graph_step_seconds({1.0, 2.0}, {0.1}), std::invalid_argument);
  EXPECT_THROW(cuda::graph_step_seconds({1.0}, {-0.1}), std::invalid_argument);
  EXPECT_THROW(cuda::graph_step_seconds({std::numeric_limits<double>::quiet_NaN()}, {0.1}),
               std::invalid_argument);
}

TEST(CudaGraphHost, RecordSaysWhereTimingsComeFrom) {
  cuda::CudaGraphSummary off;
  EXPECT_EQ(cuda::to_json(off), nlohmann::json({{"enabled", false}}));

  cuda::CudaGraphSummary on;
  on.enabled = true;
  on.eager_steps = 1;
  on.capture_seconds = {0.02, 0.03};
  on.nodes = {120, 118};
  on.event_record_nodes = {40, 38};
  on.launch_to_done_s = {0.004, 0.0041};
  const nlohmann::json j = cuda::to_json(on);
  EXPECT_TRUE(j["enabled"].get<bool>());
  EXPECT_EQ(j["eager_steps_before_capture"], 1);
  EXPECT_EQ(j["nodes_per_rank"], nlohmann::json({120, 118}));
  EXPECT_EQ(j["event_record_nodes_per_rank"], nlohmann::json({40, 38}));
  EXPECT_EQ(j["capture_seconds_per_rank"].size(), 2u);
  EXPECT_EQ(j["launch_to_done_seconds_per_rank"].size(), 2u);
  EXPECT_TRUE(j["per_action_timings_from_graph"].get<bool>());
  EXPECT_EQ(j["per_action_timing_source"], "graph event-record nodes");

  on.timing = cuda::GraphTiming::kEagerTrace;
  const nlohmann::json fallback = cuda::to_json(on);
  EXPECT_FALSE(fallback["per_action_timings_from_graph"].get<bool>());
  EXPECT_NE(fallback["per_action_timing_source"].get<std::string>().find("eager"),
            std::string::npos);
}

}  // namespace
}  // namespace ppbench
