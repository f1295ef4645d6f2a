// `--cuda-graph` computes what the eager executor computes: for 1F1B, interleaved 1F1B, ZB-H1
// and DualPipeV on --gpus 0,1 (two GPUs), and for the single-rank default on one GPU, a step
// launched from the captured graphs gives the eager step's loss and gradients, and three
// replays give what one gives (the gradients are zeroed before each launch, the losses are read
// from the buffers the graph writes). Skips with a message without a GPU (and without NCCL, or
// with fewer than two GPUs, for the parts that need them).
//
// Tolerance: the graph runs the same kernels in the same order on the same addresses as the
// eager step, so most results are bitwise equal; the exceptions are kernels that accumulate with
// floating-point atomics (cross-entropy and embedding backward, some reductions), whose order
// changes from run to run in eager mode too. Hence relative tolerances, 1e-5 in fp32 and 1e-2 in
// bf16 (an fp32 difference in the last bit can round a bf16 value the other way), on the loss
// and on the gradient vector's norm of difference.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/cuda_run.h"
#include "harness/cuda/nccl_api.h"
#include "harness/cuda/transport_factory.h"
#include "schedules/registry.h"
#include "tests/cuda_exec/gpu_watchdog.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

WorkloadSpec tiny_mlp() {
  MlpConfig c;
  c.layers = 8, c.width = 32, c.input_dim = 16, c.classes = 5;
  return build_mlp(c, 4, DType::kF32);
}

WorkloadSpec tiny_transformer(DType dtype) {
  TransformerConfig c = transformer_preset("tiny-llama");
  c.layers = 6, c.hidden = 64, c.ffn = 96, c.heads = 4, c.kv_heads = 2, c.vocab = 61, c.seq = 13;
  return build_transformer(c, 2, dtype);
}

double tolerance(const WorkloadSpec& spec) { return spec.dtype == DType::kBF16 ? 1e-2 : 1e-5; }

// The loss's relative difference and every gradient tensor's (max relative error per tensor).
void expect_same_step(const StepValues& got, const StepValues& want, double tol,
                      const std::string& label) {
  EXPECT_LE(std::abs(got.loss - want.loss), tol * std::abs(want.loss))
      << label << ": loss " << got.loss << " vs " << want.loss;
  ASSERT_FALSE(want.tensors.empty()) << label;
  const GradientComparison c = compare_gradients(got.tensors, want.tensors);
  EXPECT_TRUE(c.within(tol)) << label << ": " << c.mismatch << " worst gradient tensor "
                             << c.worst_tensor << " " << c.max_rel_error;
}

RunOutput run(const WorkloadSpec& spec, CudaRunOptions o, bool graph, int steps) {
  o.cuda_graph = graph;
  o.run.keep_gradients = true;
  o.run.warmup = 1;
  o.run.steps = steps;
  return run_cuda(spec, o);
}

// Eager, graph (captured and launched once), graph launched three times: all the same step.
void check_schedule(const WorkloadSpec& spec, const CudaRunOptions& base,
                    const std::string& label) {
  const RunOutput eager = run(spec, base, false, 1);
  const RunOutput once = run(spec, base, true, 1);
  const RunOutput thrice = run(spec, base, true, 3);
  expect_same_step(once.values, eager.values, tolerance(spec), label + " graph vs eager");
  expect_same_step(thrice.values, once.values, tolerance(spec), label + " 3 replays vs 1");

  const nlohmann::json& g = thrice.record["gpu"]["cuda_graph"];
  EXPECT_TRUE(g["enabled"].get<bool>()) << label;
  for (const auto& n : g["nodes_per_rank"]) EXPECT_GT(n.get<std::size_t>(), 0u) << label;
  // false means the driver refused cudaEventElapsedTime on graph-recorded events: runs still
  // work (total time only, docs/cuda-graphs.md), but the per-action timeline is the eager one.
  EXPECT_TRUE(g["per_action_timings_from_graph"].get<bool>())
      << label << ": " << g["per_action_timing_source"];
  if (g["per_action_timings_from_graph"].get<bool>()) {
    EXPECT_EQ(thrice.trace.compute.size(), eager.trace.compute.size()) << label;
  }
  EXPECT_GT(thrice.record["step_time_s"].get<double>(), 0) << label;
}

class CudaGraphEquivalence : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  }
};

TEST_F(CudaGraphEquivalence, SingleRankOnGpu0) {
  for (const WorkloadSpec& spec : {tiny_mlp(), tiny_transformer(DType::kBF16)}) {
    CudaRunOptions o;
    o.run.schedule = {"1f1b", 1, 4, 0, 0};
    o.run.seed = 77;
    o.run.executor.watchdog_seconds = ppbench::gpu_test_watchdog_seconds();
    o.activation_arena_bytes = std::size_t{256} << 20;
    check_schedule(spec, o, spec.workload + " " + std::string(dtype_name(spec.dtype)) + " D=1");
  }
}

TEST_F(CudaGraphEquivalence, SchedulesOnTwoGpus) {
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  if (n < 2) GTEST_SKIP() << "--gpus 0,1 needs two GPUs; this node shows " << n;
  std::string why;
  if (!cuda::nccl_compiled_in()) GTEST_SKIP() << "this build has no NCCL (--gpus 0,1 needs it)";
  ASSERT_TRUE(cuda::try_load_nccl(&why)) << why;
  int ran = 0;
  for (const char* name : {"1f1b", "interleaved-1f1b", "zb-h1", "dualpipev"})
    for (const WorkloadSpec& spec : {tiny_mlp(), tiny_transformer(DType::kF32)}) {
      const bool chunks = std::string(name) == "interleaved-1f1b";
      for (int mbs : {4, 8}) {
        const ScheduleParams p{name, 2, mbs, chunks ? 2 : 0, 0};
        try {
          generate(p);
        } catch (const UsageError&) {
          continue;
        }
        CudaRunOptions o;
        o.run.schedule = p;
        o.run.seed = 77;
        o.run.executor.watchdog_seconds = ppbench::gpu_test_watchdog_seconds();
        o.gpus = "0,1";
        o.activation_arena_bytes = std::size_t{256} << 20;
        check_schedule(spec, o,
                       std::string(name) + " " + spec.workload + " D=2 N=" + std::to_string(mbs));
        ++ran;
        break;
      }
    }
  EXPECT_EQ(ran, 8);
}

}  // namespace
}  // namespace ppbench
