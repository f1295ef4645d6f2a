// What the GPU executor decides on the host, before any launch: the transfer plan of every
// schedule is proven deadlock-free, a deadlocking order is refused naming the rank, and flags
// the CUDA backend cannot take are UsageErrors naming them. Runs without a GPU.
#include <algorithm>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/cuda_executor.h"
#include "harness/cuda/cuda_run.h"
#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_model.h"
#include "harness/cuda/transport_factory.h"
#include "schedules/registry.h"
#include "tests/common/pipeline_workloads.h"
#include "workloads/amoebanet.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"
#include "workloads/partition.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

WorkloadSpec tiny_transformer(DType dtype) {
  return small_pipeline_transformer("tiny-llama", dtype);
}

std::vector<cuda::Shape> shapes_for(const WorkloadSpec& spec, const Schedule& s) {
  const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), "balanced");
  return cuda::stage_output_shapes(spec, plan, s.placement);
}

TEST(GpuExecHost, EveryScheduleHasADeadlockFreeTransferPlan) {
  const WorkloadSpec spec = tiny_transformer(DType::kBF16);
  int planned = 0;
  for (const auto& info : all_schedules())
    for (int d : {2, 4})
      for (int n : {2 * d, 4 * d}) {
        const ScheduleParams p{std::string(info.name), d, n, info.uses_chunks ? 2 : 0, 0};
        Schedule s;
        try {
          s = generate(p);
        } catch (const UsageError&) {
          continue;
        }
        EXPECT_NO_THROW(cuda::check_transfer_plan(s, shapes_for(spec, s), cuda::DType::kBF16))
            << info.name << " D=" << d << " N=" << n;
        ++planned;
      }
  EXPECT_GT(planned, 10);
}

TEST(GpuExecHost, StageOutputShapesAreTheBoundaryTensors) {
  const WorkloadSpec spec = tiny_transformer(DType::kF32);
  const Schedule s = generate({"1f1b", 2, 4, 0, 0});
  const std::vector<cuda::Shape> shapes = shapes_for(spec, s);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0], (cuda::Shape{2, 5, 16}));  // [micro-batch, seq, hidden]
  EXPECT_TRUE(shapes[1].empty());                 // the last stage sends nothing
}

TEST(GpuExecHost, ADeadlockingOrderIsCaughtBeforeLaunch) {
  const WorkloadSpec spec = tiny_transformer(DType::kBF16);
  Schedule s = generate({"1f1b", 4, 8, 0, 0});
  // Rank 0 waits for B0.0's gradient before sending F0.0's activation.
  auto& r0 = s.ranks[0];
  auto b = std::find(r0.begin(), r0.end(), Action::single(Op::B, 0, 0));
  std::rotate(r0.begin(), b, b + 1);
  try {
    cuda::check_transfer_plan(s, shapes_for(spec, s), cuda::DType::kBF16);
    FAIL() << "the deadlocking order was accepted";
  } catch (const InvalidSchedule& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find("deadlock"), std::string::npos) << why;
    EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
  }
}

TEST(GpuExecHost, RejectsWhatTheCudaBackendCannotRun) {
  CudaRunOptions o;
  o.run.schedule = {"1f1b", 2, 4, 0, 0};
  AmoebaNetConfig a;
  a.layers = 3, a.filters = 8, a.image_size = 32, a.classes = 5;
  auto message = [&](const WorkloadSpec& spec, const CudaRunOptions& opts) {
    try {
      check_cuda_run_options(spec, opts);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(build_amoebanet(a, 2, DType::kF32), o), "");  // AmoebaNet has GPU layers
  EXPECT_NE(message(tiny_transformer(DType::kF64), o).find("f64"), std::string::npos);
  EXPECT_EQ(message(tiny_transformer(DType::kBF16), o), "");
  // The ids are int32 on the GPU: 2^31 of them fit, one more does not.
  TransformerConfig big = transformer_preset("tiny-llama");
  big.vocab = std::int64_t{1} << 31;
  EXPECT_EQ(message(build_transformer(big, 1, DType::kBF16), o), "");
  big.vocab += 1;
  const std::string ids = message(build_transformer(big, 1, DType::kBF16), o);
  for (const std::string needle : {"--vocab 2147483649", "CUDA backend", "int32", "2147483648"})
    EXPECT_NE(ids.find(needle), std::string::npos) << needle << " not in: " << ids;
  MlpConfig classes;
  classes.layers = 2, classes.width = 2, classes.classes = (std::int64_t{1} << 31) + 1;
  EXPECT_NE(message(build_mlp(classes, 4, DType::kF32), o).find("--classes 2147483649"),
            std::string::npos);
  CudaRunOptions link = o;
  link.link_bandwidth_gb_per_s = 50;
  EXPECT_NE(message(tiny_transformer(DType::kBF16), link).find("--virtual-devices"),
            std::string::npos);
  link.virtual_devices = 2;
  EXPECT_EQ(message(tiny_transformer(DType::kBF16), link), "");
  link.link_bandwidth_gb_per_s = -1;
  EXPECT_NE(message(tiny_transformer(DType::kBF16), link), "");
  // --sms-per-device sizes virtual devices' partitions only.
  CudaRunOptions sized = o;
  sized.partition_sms = 16;
  EXPECT_NE(message(tiny_transformer(DType::kBF16), sized).find("--sms-per-device 16"),
            std::string::npos);
  sized.virtual_devices = 2;
  EXPECT_EQ(message(tiny_transformer(DType::kBF16), sized), "");
  // --cuda-graph: NCCL placements only (test_graph_host.cpp has the rest).
  CudaRunOptions graph = o;
  graph.cuda_graph = true;
  EXPECT_EQ(message(tiny_transformer(DType::kBF16), graph), "");
  graph.virtual_devices = 2;
  EXPECT_NE(message(tiny_transformer(DType::kBF16), graph).find("--cuda-graph"), std::string::npos);
}

TEST(GpuExecHost, NcclRefusesTwoRanksOnOneGpu) {
  try {
    cuda::make_nccl_transport({0, 0});
    FAIL() << "two ranks on GPU 0 were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--virtual-devices"), std::string::npos) << e.what();
  }
}

// Setting up devices on a machine that has none fails as the machine's problem (exit code 3),
// not as an internal CUDA error (exit code 1). Only where no GPU is visible.
TEST(GpuExecHost, OpeningDevicesWithoutAGpuIsTheMachinesProblem) {
  std::string why;
  if (cuda::has_gpu(&why)) GTEST_SKIP() << "a GPU is visible";
  GpuPlacement p;
  p.gpus = {0};
  try {
    (void)cuda::GpuDevices::open(p);
    FAIL() << "opened a GPU where none is visible";
  } catch (const EnvironmentError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot set up the GPUs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ppbench
