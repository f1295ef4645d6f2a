// On a GPU split into D in {2, 4, 8} virtual devices, every schedule's pipelined step computes the
// loss and every parameter gradient of the CPU backend's single-device float64 step (norm-wise
// error per tensor), within fp32 (1e-4) or bf16 (5e-2) tolerance, or within 4 x how far the
// reference itself moves under one rounding of the dtype where that is more
// (tests/cuda_exec/run_matches_cpu.h): the GPU executor moves the right tensors to the right
// partitions in the right order. Skips with a message without a GPU.
#include <cmath>
#include <optional>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/cuda_run.h"
#include "schedules/registry.h"
#include "tests/cuda_exec/gpu_watchdog.h"
#include "tests/cuda_exec/run_matches_cpu.h"
#include "workloads/cuda/device_info.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

WorkloadSpec tiny_mlp(DType dtype) {
  MlpConfig c;
  c.layers = 16, c.width = 32, c.input_dim = 16, c.classes = 5;  // 16 stages at D = 8 (V shapes)
  return build_mlp(c, 4, dtype);
}

WorkloadSpec tiny_transformer(DType dtype) {
  TransformerConfig c = transformer_preset("tiny-llama");
  // 14 decoder layers + embedding + head: 16 stages at D = 8 (V shapes).
  c.layers = 14, c.hidden = 64, c.ffn = 96, c.heads = 4, c.kv_heads = 2, c.vocab = 61, c.seq = 13;
  return build_transformer(c, 2, dtype);
}

void PrintTo(const struct Case& c, std::ostream* os);

// bf16 against float64 over a whole model: the GPU rounds every parameter and activation
// (~0.2% each, some 140 roundings through 16 layers: ~1% RMS), the reference rounds none, so a
// whole step gets 5e-2 at least; a single layer keeps 2e-2. On the H100 (2026-11-27) the MLP's
// worst bias gradient sat at 5.0 and 6.3 % by the old max-norm measure, the same for every
// schedule: bf16 itself, which the reference's spread now accounts for.
double tolerance(DType d) { return d == DType::kBF16 ? 5e-2 : 1e-4; }

struct Case {
  std::string workload;
  DType dtype;
  int devices;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.workload << " " << dtype_name(c.dtype) << " D=" << c.devices;
}

class VirtualDeviceEquivalence : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  }
};

TEST_P(VirtualDeviceEquivalence, EveryScheduleMatchesTheSingleDeviceStep) {
  const Case c = GetParam();
  const WorkloadSpec spec = c.workload == "mlp" ? tiny_mlp(c.dtype) : tiny_transformer(c.dtype);
  const int d = c.devices;
  int ran = 0;
  for (const auto& info : all_schedules()) {
    // The smallest micro-batch count each schedule allows at this D.
    for (int n : {d, 2 * d, 4 * d}) {
      ScheduleParams p{std::string(info.name), d, n, info.uses_chunks ? 2 : 0, 0};
      try {
        generate(p);
      } catch (const UsageError&) {
        continue;
      }
      const std::string label = p.name + " D=" + std::to_string(d) + " N=" + std::to_string(n);
      CudaRunOptions o;
      o.run.schedule = p;
      o.run.seed = 77;
      o.run.executor.watchdog_seconds = ppbench::gpu_test_watchdog_seconds();
      o.virtual_devices = d;
      o.activation_arena_bytes = std::size_t{256} << 20;
      const std::optional<RunOutput> out =
          run_and_compare_with_cpu(spec, o, tolerance(c.dtype), label);
      if (!out) break;
      EXPECT_EQ(out->trace.ranks, d) << label;
      ++ran;
      break;
    }
  }
  EXPECT_EQ(ran, static_cast<int>(all_schedules().size())) << "every schedule runs at D=" << d;
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, VirtualDeviceEquivalence,
    ::testing::Values(Case{"mlp", DType::kF32, 2}, Case{"mlp", DType::kF32, 4},
                      Case{"mlp", DType::kF32, 8}, Case{"mlp", DType::kBF16, 2},
                      Case{"mlp", DType::kBF16, 4}, Case{"mlp", DType::kBF16, 8},
                      Case{"transformer", DType::kF32, 2}, Case{"transformer", DType::kF32, 4},
                      Case{"transformer", DType::kF32, 8}, Case{"transformer", DType::kBF16, 2},
                      Case{"transformer", DType::kBF16, 4}, Case{"transformer", DType::kBF16, 8}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return i.param.workload + "_" + std::string(dtype_name(i.param.dtype)) + "_D" +
             std::to_string(i.param.devices);
    });

}  // namespace
}  // namespace ppbench
