#include "harness/backends/cpu/cpu_run.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include "harness/backends/cpu/pipeline_rank.h"
#include "harness/backends/run_record.h"
#include "schedules/error.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "workloads/partition.h"

namespace ppbench {

double StepValues::grad_norm() const {
  double sum = 0;
  for (double g : grads) sum += g * g;
  return std::sqrt(sum);
}

namespace {

template <typename T>
struct Step {
  StepValues values;
  StepRecord record;
};

template <typename T>
class CpuRun {
 public:
  CpuRun(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan, const RunOptions& o)
      : s_(s) {
    const int n = s.params.microbatches;
    for (int m = 0; m < n; ++m) data_.push_back(cpu::make_microbatch<T>(spec, o.seed, m));
    for (int r = 0; r < s.placement.ranks; ++r)
      ranks_.push_back(std::make_unique<cpu::PipelineRank<T>>(spec, plan, s.placement, r, data_, o.seed,
                                                              o.recompute));
    std::vector<StageWork<cpu::Tensors<T>>*> work;
    for (auto& r : ranks_) work.push_back(r.get());
    executor_ = std::make_unique<CpuExecutor<cpu::Tensors<T>>>(s, work, o.executor);
    parts_ = static_cast<int>(plan.stages.size());
  }

  Step<T> step() {
    for (auto& r : ranks_) r->zero_grad();
    Step<T> out;
    out.record = executor_->run_step();
    double loss = 0;
    for (auto& r : ranks_)
      for (auto [mb, l] : r->losses) loss += static_cast<double>(l);
    out.values.loss = loss / static_cast<double>(data_.size());
    // Gradients in layer order, the copies of each model part summed.
    std::vector<std::vector<double>> by_part(parts_);
    for (auto& r : ranks_)
      for (auto& [part, params] : r->params_by_part()) {
        std::vector<double>& g = by_part[part];
        std::size_t k = 0;
        for (cpu::Param<T>* prm : params)
          for (T v : prm->grad.data) {
            if (k == g.size()) g.push_back(0);
            g[k++] += static_cast<double>(v);
          }
      }
    for (auto& g : by_part) out.values.grads.insert(out.values.grads.end(), g.begin(), g.end());
    return out;
  }

 private:
  const Schedule& s_;
  std::vector<cpu::MicroBatch<T>> data_;
  std::vector<std::unique_ptr<cpu::PipelineRank<T>>> ranks_;
  std::unique_ptr<CpuExecutor<cpu::Tensors<T>>> executor_;
  int parts_ = 0;
};

template <typename T>
RunOutput run_typed(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
                    const RunOptions& o) {
  CpuRun<T> run(spec, s, plan, o);
  std::vector<double> step_times;
  Step<T> last;
  for (int k = 0; k < o.warmup + o.steps; ++k) {
    last = run.step();
    const double t = makespan_of(last.record.trace);
    if (k >= o.warmup) step_times.push_back(t);
    if (o.progress)
      std::cerr << "step " << k + 1 << "/" << o.warmup + o.steps << (k < o.warmup ? " (warm-up)" : "")
                << ": " << t * 1e3 << " ms, loss " << last.values.loss << "\n";
  }
  RunOutput out;
  out.trace = last.record.trace;
  out.values = last.values;

  const std::vector<double> model_peak = predicted_peak_bytes(s, plan, o.recompute);
  nlohmann::json r = run_record({&spec, &s, &plan, o.steps, o.warmup, o.seed, o.recompute, step_times,
                                 &out.trace, out.values.loss, out.values.grad_norm()},
                                "cpu");
  nlohmann::json mem = nlohmann::json::array();
  for (int k = 0; k < s.placement.ranks; ++k)
    mem.push_back({{"rank", k},
                   {"measured_peak_bytes", last.record.arenas[k].peak()},
                   {"model_peak_bytes", model_peak[k]}});
  r["activation_bytes"] = mem;
  out.record = std::move(r);
  return out;
}

}  // namespace

RunOutput run_cpu(const WorkloadSpec& spec, const RunOptions& o) {
  require(o.steps >= 1, "--steps must be >= 1, got " + std::to_string(o.steps));
  require(o.warmup >= 0, "--warmup must be >= 0, got " + std::to_string(o.warmup));
  require(spec.dtype != DType::kBF16, "--dtype bf16 is for the CUDA backend; the CPU backend runs f32 or f64");
  const Schedule s = generate(o.schedule);
  validate(s, {.channel_capacity = o.executor.channel_capacity});
  const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), o.partition);
  return spec.dtype == DType::kF64 ? run_typed<double>(spec, s, plan, o) : run_typed<float>(spec, s, plan, o);
}

StepValues single_device_step(const WorkloadSpec& spec, int microbatches, std::uint64_t seed) {
  using T = double;
  std::vector<cpu::PipelineLayerPtr<T>> layers;
  for (std::size_t l = 0; l < spec.layers.size(); ++l) layers.push_back(cpu::make_pipeline_layer<T>(spec, l, seed));
  StepValues out;
  for (int m = 0; m < microbatches; ++m) {
    const cpu::MicroBatch<T> d = cpu::make_microbatch<T>(spec, seed, m);
    const cpu::MicroBatchData<T> md{&d.inputs, &d.targets, T(1) / static_cast<T>(microbatches)};
    std::vector<cpu::Saved<T>> saved(layers.size());
    cpu::Tensors<T> x;
    for (std::size_t l = 0; l < layers.size(); ++l) x = layers[l]->forward(std::move(x), saved[l], md);
    out.loss += x.front().data.front() / microbatches;
    for (std::size_t l = layers.size(); l-- > 0;) {
      x = layers[l]->backward_input(std::move(x), saved[l], md);
      layers[l]->backward_weight(saved[l]);
    }
  }
  for (auto& layer : layers)
    for (cpu::Param<T>* prm : layer->params()) out.grads.insert(out.grads.end(), prm->grad.data.begin(), prm->grad.data.end());
  return out;
}

}  // namespace ppbench
