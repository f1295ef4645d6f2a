#include "harness/backends/cpu/cpu_run.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "harness/backends/cpu/pipeline_rank.h"
#include "harness/backends/run_loop.h"
#include "harness/backends/run_record.h"
#include "harness/executor/cpu_executor.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "workloads/partition.h"

namespace ppbench {

namespace {

template <typename T>
class CpuRun {
 public:
  CpuRun(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
         const RunOptions& o)
      : spec_(spec) {
    const int n = s.params.microbatches;
    for (int m = 0; m < n; ++m) data_.push_back(cpu::make_microbatch<T>(spec, o.seed, m));
    for (int r = 0; r < s.placement.ranks; ++r)
      ranks_.push_back(std::make_unique<cpu::PipelineRank<T>>(spec, plan, s.placement, r, data_,
                                                              o.seed, o.recompute));
    std::vector<StageWork<cpu::Tensors<T>>*> work;
    for (auto& r : ranks_) work.push_back(r.get());
    executor_ = std::make_unique<CpuExecutor<cpu::Tensors<T>>>(s, work, o.executor);
    parts_ = static_cast<int>(plan.stages.size());
  }

  // One step; returns its record and mean loss (the gradients stay where they are).
  StepRecord step(double& loss) {
    for (auto& r : ranks_) r->zero_grad();
    StepRecord record = executor_->run_step();
    loss = 0;
    for (auto& r : ranks_)
      for (auto [mb, l] : r->losses) loss += static_cast<double>(l);
    loss /= static_cast<double>(data_.size());
    return record;
  }

  // The last step's gradient statistics (and tensors, with `keep`), copies of a part summed.
  void summarize(bool keep, StepValues& out) {
    std::vector<std::vector<StageParams<cpu::Param<T>>>> by_rank;
    for (auto& r : ranks_) by_rank.push_back(r->params_by_layer());
    summarize_gradients_on_host(
        spec_, by_rank, parts_, keep, out,
        [](const StageParams<cpu::Param<T>>&, const cpu::Param<T>* p, std::vector<double>& sum) {
          const auto& g = p->grad.data;
          if (sum.empty()) sum.assign(g.size(), 0.0);
          for (std::size_t i = 0; i < g.size(); ++i) sum[i] += static_cast<double>(g[i]);
        });
  }

 private:
  const WorkloadSpec& spec_;
  std::vector<cpu::MicroBatch<T>> data_;
  std::vector<std::unique_ptr<cpu::PipelineRank<T>>> ranks_;
  std::unique_ptr<CpuExecutor<cpu::Tensors<T>>> executor_;
  int parts_ = 0;
};

template <typename T>
RunOutput run_typed(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
                    const RunOptions& o) {
  CpuRun<T> run(spec, s, plan, o);
  StepRecord last;
  RunOutput out;
  const RunTimings timings = run_steps(o.warmup, o.steps, o.progress, [&](int, bool) {
    last = run.step(out.values.loss);
    return StepOutcome{makespan_of(last.trace), out.values.loss, ""};
  });
  // Once, after the last step: nothing of it is inside a timed step.
  run.summarize(o.keep_gradients || o.check, out.values);
  out.trace = last.trace;

  nlohmann::json r =
      run_record({&spec, &s, &plan, o.seed, o.recompute, timings, &out.trace, out.values}, "cpu");
  std::vector<double> measured;
  for (const ActivationArena& a : last.arenas) measured.push_back(a.peak());
  r["activation_bytes"] =
      activation_bytes_json(measured, predicted_peak_bytes(s, plan, o.recompute));
  if (o.check) {
    const StepValues ref = single_device_step(spec, s.params.microbatches, o.seed);
    const double tol = o.check_tolerance > 0 ? o.check_tolerance : check_tolerance(spec.dtype);
    r["check"] = check_json(compare_gradients(out.values.tensors, ref.tensors), tol,
                            out.values.loss, ref.loss, "the CPU float64 single-device step");
  }
  if (!o.keep_gradients) out.values.tensors.clear();
  out.record = std::move(r);
  return out;
}

}  // namespace

RunOutput run_cpu(const WorkloadSpec& spec, const RunOptions& o) {
  check_step_counts(o.steps, o.warmup);
  require(spec.dtype != DType::kBF16,
          "--dtype bf16 is for the CUDA backend; the CPU backend runs f32 or f64");
  const Schedule s = schedule_of(o);
  validate(s, {.channel_capacity = o.executor.channel_capacity});
  const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), o.partition);
  return spec.dtype == DType::kF64 ? run_typed<double>(spec, s, plan, o)
                                   : run_typed<float>(spec, s, plan, o);
}

StepValues single_device_step(const WorkloadSpec& spec, int microbatches, std::uint64_t seed) {
  using T = double;
  std::vector<cpu::PipelineLayerPtr<T>> layers;
  for (std::size_t l = 0; l < spec.layers.size(); ++l)
    layers.push_back(cpu::make_pipeline_layer<T>(spec, l, seed));
  StepValues out;
  for (int m = 0; m < microbatches; ++m) {
    const cpu::MicroBatch<T> d = cpu::make_microbatch<T>(spec, seed, m);
    const cpu::MicroBatchData<T> md{&d.inputs, &d.targets, T(1) / static_cast<T>(microbatches)};
    std::vector<cpu::Saved<T>> saved(layers.size());
    cpu::Tensors<T> x;
    for (std::size_t l = 0; l < layers.size(); ++l)
      x = layers[l]->forward(std::move(x), saved[l], md);
    out.loss += x.front().data.front() / microbatches;
    for (std::size_t l = layers.size(); l-- > 0;) {
      x = layers[l]->backward_input(std::move(x), saved[l], md);
      layers[l]->backward_weight(saved[l]);
    }
  }
  // One part holding every layer: the reference has no stages.
  StageParams<cpu::Param<T>> all;
  for (std::size_t l = 0; l < layers.size(); ++l)
    all.layers.emplace_back(static_cast<int>(l), layers[l]->params());
  const std::vector<std::vector<StageParams<cpu::Param<T>>>> one_rank = {{all}};
  summarize_gradients_on_host(
      spec, one_rank, 1, true, out,
      [](const StageParams<cpu::Param<T>>&, const cpu::Param<T>* p, std::vector<double>& sum) {
        sum.assign(p->grad.data.begin(), p->grad.data.end());
      });
  return out;
}

}  // namespace ppbench
