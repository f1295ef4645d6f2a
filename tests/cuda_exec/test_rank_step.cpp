// What a process of `mpirun ... --backend cuda` runs (harness/mpi/cuda_mpi_run.h), on one GPU:
// CudaExecutor::run_rank_step walks one rank on the calling thread, its trace measured from
// host_start_s; and two replicas of N micro-batches (GpuPipelineRank's first_microbatch and
// loss_microbatches) whose gradients, summed, are one rank's over all 2N. Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/cuda/cuda_executor.h"
#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_model.h"
#include "harness/cuda/gpu_transport.h"
#include "harness/cuda/transport_factory.h"
#include "schedules/registry.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"
#include "workloads/partition.h"

namespace ppbench {
namespace {

WorkloadSpec small_mlp() {
  MlpConfig c;
  c.layers = 4, c.width = 32, c.input_dim = 16, c.classes = 5;
  return build_mlp(c, 4, DType::kF32);
}

struct StepResult {
  std::vector<std::vector<float>> grads;  // every parameter's gradient, CPU layout, in order
  double loss_sum = 0;                    // the scaled-by-nothing per-micro-batch losses, summed
  cuda::CudaStepRecord record;
};

// One rank (naive schedule, D = 1) over micro-batches first .. first + n - 1, losses scaled by
// 1 / loss_n, stepped by run_rank_step.
StepResult rank_step(const WorkloadSpec& spec, int n, int first, int loss_n) {
  const Schedule s = generate({"naive", 1, n, 0, 0});
  const PartitionPlan plan = partition(spec, 1, "uniform");
  GpuPlacement gp;
  gp.gpus = {0};
  auto devices = cuda::GpuDevices::open(gp);
  devices->rank(0).make_current();
  auto transport = cuda::make_copy_transport(1, std::nullopt);
  cuda::GpuPipelineRank rank(spec, plan, s.placement, 0, 1234, devices->rank(0).compute,
                             std::size_t{64} << 20, first, loss_n);
  cuda::CudaExecutor ex(s, *devices, {&rank}, {&rank.activations()}, *transport,
                        cuda::stage_output_shapes(spec, plan, s.placement), cuda::gpu_dtype(spec),
                        {});
  devices->rank(0).make_current();
  rank.zero_grad();
  CUDA_CHECK(cudaStreamSynchronize(devices->rank(0).compute));
  StepResult out;
  out.record = ex.run_rank_step(0);
  for (auto [mb, l] : rank.losses()) out.loss_sum += l;
  for (const auto& sp : rank.params_by_layer())
    for (const cuda::Param* p : all_params(sp))
      out.grads.push_back(cuda::download_cpu_layout(*p, p->grad));
  return out;
}

class RankStep : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  }
};

TEST_F(RankStep, TwoReplicasOfTwoMicroBatchesSumToOneRankOfFour) {
  const WorkloadSpec spec = small_mlp();
  const StepResult whole = rank_step(spec, 4, 0, 0);
  const StepResult r0 = rank_step(spec, 2, 0, 4);
  const StepResult r1 = rank_step(spec, 2, 2, 4);
  ASSERT_EQ(whole.grads.size(), r0.grads.size());
  EXPECT_NEAR(r0.loss_sum + r1.loss_sum, whole.loss_sum, 1e-5 * std::abs(whole.loss_sum));
  for (std::size_t t = 0; t < whole.grads.size(); ++t) {
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < whole.grads[t].size(); ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(whole.grads[t][i])));
      worst = std::max(worst, std::abs(static_cast<double>(r0.grads[t][i]) + r1.grads[t][i] -
                                       whole.grads[t][i]));
    }
    EXPECT_LE(worst, 1e-4 * scale) << "tensor " << t;
  }
  // The replicas drew different data: each alone is not the whole.
  EXPECT_NE(r0.loss_sum, r1.loss_sum);
}

TEST_F(RankStep, TheTraceHoldsTheRankFromItsHostStart) {
  const StepResult r = rank_step(small_mlp(), 3, 0, 0);
  EXPECT_GT(r.record.host_start_s, 0);
  ASSERT_EQ(r.record.trace.compute.size(), 6u);  // F and B of three micro-batches
  for (const ComputeEvent& e : r.record.trace.compute) {
    EXPECT_EQ(e.rank, 0);
    EXPECT_GE(e.start, 0);
    EXPECT_GE(e.end, e.start);
  }
}

}  // namespace
}  // namespace ppbench
