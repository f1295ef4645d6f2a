// The optimizer step (`run --optimizer`): AdamW and SGD element by element against PyTorch's
// formulas written out in scalars; a part's copies updated alike from their summed gradients;
// and two training steps of every schedule equal two steps on one device (the second step's
// loss and gradients, which depend on the first step's update), with the loss changing; and
// what a run holds in memory against the memory model.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/backends/cpu/cpu_run.h"
#include "harness/backends/cpu/part_optimizer.h"
#include "schedules/registry.h"
#include "tests/common/pipeline_workloads.h"
#include "workloads/cpu/optimizer.h"

namespace ppbench {
namespace {

// torch.optim.AdamW's single-tensor step for one element, written out.
struct ScalarAdamW {
  double m = 0, v = 0;
  double step(double p, double g, int t, double lr, double wd) {
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double mhat = m / (1 - std::pow(b1, t)), vhat = v / (1 - std::pow(b2, t));
    return p - lr * mhat / (std::sqrt(vhat) + eps);
  }
};

TEST(Optimizer, AdamWFollowsTorchsFormula) {
  std::vector<double> p = {0.5, -1.25, 3.0, 0.0, 2e-3}, m(5, 0), v(5, 0);
  std::vector<ScalarAdamW> ref(5);
  std::vector<double> want = p;
  for (int t = 1; t <= 3; ++t) {
    const std::vector<double> g = {0.1 * t, -0.2, 1e-9, 4.0 / t, -3.0};
    cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), p.size(),
                      {1e-2, 0.1, 0.9, 0.999, 1e-8, t});
    for (std::size_t i = 0; i < p.size(); ++i) {
      want[i] = ref[i].step(want[i], g[i], t, 1e-2, 0.1);
      EXPECT_NEAR(p[i], want[i], 1e-15) << "element " << i << " step " << t;
    }
  }
  // The update moved every parameter: a no-op kernel fails here.
  EXPECT_NE(p[0], 0.5);
}

TEST(Optimizer, SgdSubtractsTheScaledGradient) {
  std::vector<float> p = {1, 2, 3}, g = {0.5f, -1, 0};
  cpu::sgd_update(p.data(), g.data(), p.size(), 0.1);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], 2.1f);
  EXPECT_FLOAT_EQ(p[2], 3.0f);
}

cpu::Param<double> param(std::vector<double> value, std::vector<double> grad) {
  cpu::Param<double> p;
  p.init("w", {static_cast<std::int64_t>(value.size())});
  std::copy(value.begin(), value.end(), p.value.data.begin());
  std::copy(grad.begin(), grad.end(), p.grad.data.begin());
  return p;
}

TEST(Optimizer, CopiesOfAPartStepTogetherFromTheirSummedGradients) {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kAdamW;
  o.lr = 0.05;
  cpu::Param<double> a = param({1, 2}, {0.25, -1}), b = param({1, 2}, {0.5, 3});
  cpu::Param<double> alone = param({1, 2}, {0.75, 2});  // the sum, on one copy
  cpu::PartOptimizer<double> two(o, {{&a}, {&b}}), one(o, {{&alone}});
  two.step();
  one.step();
  EXPECT_EQ(std::vector<double>(a.value.data.begin(), a.value.data.end()),
            std::vector<double>(alone.value.data.begin(), alone.value.data.end()));
  EXPECT_EQ(std::vector<double>(b.value.data.begin(), b.value.data.end()),
            std::vector<double>(alone.value.data.begin(), alone.value.data.end()));
  // A remote copy's gradients count like a local one's.
  cpu::Param<double> c = param({1, 2}, {0.25, -1});
  cpu::PartOptimizer<double> with_remote(o, {{&c}});
  const std::vector<cpu::AlignedVector<double>> remote = {{0.5, 3}};
  with_remote.step(&remote);
  EXPECT_EQ(std::vector<double>(c.value.data.begin(), c.value.data.end()),
            std::vector<double>(alone.value.data.begin(), alone.value.data.end()));
}

// Calls check(params, label) for every family at D = 2 and 4 with N = 8 (those it allows);
// returns how many.
template <class Check>
int for_every_schedule(Check check) {
  int checked = 0;
  for (const auto& info : all_schedules())
    for (int d : {2, 4}) {
      ScheduleParams p{std::string(info.name), d, 8, info.uses_chunks ? 2 : 0, 0};
      try {
        generate(p);
      } catch (const UsageError&) {
        continue;
      }
      check(p, p.name + " D=" + std::to_string(d));
      ++checked;
    }
  return checked;
}

// Every schedule, two steps (one warm-up, one measured), against two steps on one device.
void expect_two_steps_match(OptimizerOptions::Kind kind) {
  const WorkloadSpec spec = small_pipeline_mlp(DType::kF64);
  OptimizerOptions opt;
  opt.kind = kind;
  opt.lr = 0.05;  // large enough that the second step differs visibly
  const StepValues first = single_device_step(spec, 8, 7, 1, opt);
  const StepValues second = single_device_step(spec, 8, 7, 2, opt);
  EXPECT_GT(std::abs(second.loss - first.loss), 1e-6) << "the update changed nothing";
  const int checked = for_every_schedule([&](const ScheduleParams& p, const std::string& label) {
    RunOptions o;
    o.schedule = p;
    o.seed = 7;
    o.warmup = 1;
    o.steps = 1;
    o.optimizer = opt;
    o.keep_gradients = true;
    const RunOutput out = run_cpu(spec, o);
    EXPECT_NEAR(out.values.loss, second.loss, 1e-12) << label;
    const GradientComparison cmp = compare_gradients(out.values.tensors, second.tensors);
    EXPECT_TRUE(cmp.within(1e-10))
        << label << ": " << cmp.mismatch << " " << cmp.worst_tensor << " " << cmp.max_rel_error;
    // One update per model part (the copies of a part are updated together), on the trace.
    EXPECT_EQ(out.trace.updates.size(),
              static_cast<std::size_t>(generate(p).placement.stages_per_chain()))
        << label;
    EXPECT_EQ(out.record["optimizer"]["name"], to_string(kind)) << label;
  });
  EXPECT_GT(checked, 20);
}

// What a run holds, measured, against `ppbench memory`'s model: parameters, gradients, AdamW's
// moments (every copy's) and the activation peak equal, with recompute too (its peak midway
// through a backward); the bytes in flight within the bound.
void expect_run_holds_what_the_model_says(bool recompute) {
  const WorkloadSpec spec = small_pipeline_mlp(DType::kF64);
  const int checked = for_every_schedule([&](const ScheduleParams& p, const std::string& label) {
    RunOptions o;
    o.schedule = p;
    o.recompute = recompute;
    o.optimizer.kind = OptimizerOptions::Kind::kAdamW;
    const RunOutput out = run_cpu(spec, o);
    double comm = 0;
    for (const auto& r : out.record["memory"]["ranks"]) {
      const auto& got = r["measured"];
      const auto& want = r["model"];
      for (const char* k : {"params", "grads", "optimizer", "activations"})
        EXPECT_EQ(got[k].get<double>(), want[k].get<double>())
            << label << " rank " << r["rank"] << " " << k;
      EXPECT_LE(got["comm"].get<double>(), want["comm"].get<double>()) << label;
      EXPECT_GT(got["optimizer"].get<double>(), 0) << label;
      comm += got["comm"].get<double>();
    }
    EXPECT_GT(comm, 0) << label << ": nothing was in flight";
  });
  EXPECT_GT(checked, 20);
}

TEST(RunMemory, EveryScheduleHoldsWhatTheModelSays) { expect_run_holds_what_the_model_says(false); }
TEST(RunMemory, EveryScheduleWithRecomputeHoldsWhatTheModelSays) {
  expect_run_holds_what_the_model_says(true);
}

TEST(Optimizer, TwoAdamWStepsOfEveryScheduleMatchOneDevice) {
  expect_two_steps_match(OptimizerOptions::Kind::kAdamW);
}
TEST(Optimizer, TwoSgdStepsOfEveryScheduleMatchOneDevice) {
  expect_two_steps_match(OptimizerOptions::Kind::kSgd);
}

// In a run's trace, rank 1's update of stage 1 begins after its last backward's gradient has been
// sent to rank 0: the update no longer holds that hand-over back. Both times are on the step's
// clock. Rank 0's comm event starts when the gradient was sent wherever rank 0 was already
// waiting for it (not `queued`), which in GPipe with one micro-batch it nearly always is (it has
// nothing else to do); a run where it was not says nothing about the send, so the test looks at
// up to five runs for one. (tests/executor/test_cpu_executor.cpp checks the walk's order itself,
// for 1F1B too.)
TEST(Optimizer, AStagesUpdateBeginsAfterItsLastBackwardsGradientIsSent) {
  const WorkloadSpec spec = small_pipeline_mlp(DType::kF64);
  const Task gradient_of{Op::B, 1, 0};  // rank 1's only backward
  int seen = 0;
  for (int run = 0; run < 5 && seen == 0; ++run) {
    RunOptions o;
    o.schedule = {"gpipe", 2, 1};
    o.steps = 1;
    o.optimizer.kind = OptimizerOptions::Kind::kAdamW;
    const Trace t = run_cpu(spec, o).trace;
    const auto update = std::find_if(t.updates.begin(), t.updates.end(),
                                     [](const UpdateEvent& u) { return u.rank == 1; });
    const auto gradient = std::find_if(t.comm.begin(), t.comm.end(), [&](const CommEvent& c) {
      return c.src_rank == 1 && c.task == gradient_of;
    });
    ASSERT_NE(update, t.updates.end());
    ASSERT_NE(gradient, t.comm.end());
    if (gradient->queued) continue;
    ++seen;
    EXPECT_LE(gradient->start, update->start);
  }
  EXPECT_EQ(seen, 1) << "rank 0 never waited for the gradient";
}

}  // namespace
}  // namespace ppbench
