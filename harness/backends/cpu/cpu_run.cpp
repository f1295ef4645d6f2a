#include "harness/backends/cpu/cpu_run.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <tuple>

#include "core/cpu_cores.h"
#include "core/error.h"
#include "harness/backends/cpu/model_builder.h"
#include "harness/backends/cpu/part_optimizer.h"
#include "harness/backends/cpu/pipeline_rank.h"
#include "harness/backends/cpu/reference_step.h"
#include "harness/backends/run_loop.h"
#include "harness/backends/run_record.h"
#include "harness/executor/cpu_executor.h"
#include "harness/memory_estimate.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "workloads/counter_rng.h"
#include "workloads/cpu/gemm_library.h"
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
    if (o.optimizer.enabled()) set_up_optimizer(s.placement, o.optimizer);
  }

  // One step; returns its record and mean loss (the gradients stay where they are).
  StepRecord step(double& loss) {
    for (auto& r : ranks_) r->zero_grad();
    for (auto& a : arrivals_) a.store(0);
    for (auto& u : updates_) u.clear();
    StepRecord record = executor_->run_step();
    for (const auto& u : updates_)
      record.trace.updates.insert(record.trace.updates.end(), u.begin(), u.end());
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

  // Per rank, the bytes its parameters, gradients and optimizer states hold now.
  std::vector<HeldMemory> held_bytes() {
    std::vector<HeldMemory> out(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      std::tie(out[r].params, out[r].grads) = ranks_[r]->param_and_grad_bytes();
    for (std::size_t part = 0; part < optimizers_.size(); ++part)
      for (std::size_t c = 0; c < copy_rank_[part].size(); ++c)
        out[static_cast<std::size_t>(copy_rank_[part][c])].optimizer +=
            static_cast<double>(optimizers_[part].state_bytes(c));
    return out;
  }

 private:
  // One optimizer per model part over every copy of it; each rank updates a stage after the
  // stage's last backward has sent its input gradient on (RankHooks::stage_done). A part with two
  // copies (on two ranks) is updated once both copies are done, by the rank that finishes second,
  // from their summed gradients.
  void set_up_optimizer(const Placement& p, const OptimizerOptions& o) {
    std::vector<std::vector<std::vector<cpu::Param<T>*>>> copies(static_cast<std::size_t>(parts_));
    part_of_.assign(static_cast<std::size_t>(p.stages()), -1);
    for (int st = 0; st < p.stages(); ++st) part_of_[static_cast<std::size_t>(st)] = p.part(st);
    copy_rank_.assign(static_cast<std::size_t>(parts_), {});
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      for (const auto& sp : ranks_[r]->params_by_layer()) {
        copies[static_cast<std::size_t>(sp.part)].push_back(all_params(sp));
        copy_rank_[static_cast<std::size_t>(sp.part)].push_back(static_cast<int>(r));
      }
    for (auto& c : copies) optimizers_.emplace_back(o, std::move(c));
    arrivals_ = std::vector<std::atomic<int>>(static_cast<std::size_t>(parts_));
    updates_.resize(ranks_.size());
    std::vector<RankHooks> hooks(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      hooks[r].stage_done = [this, r](int stage) {
        const auto part = static_cast<std::size_t>(part_of_[static_cast<std::size_t>(stage)]);
        cpu::PartOptimizer<T>& opt = optimizers_[part];
        // The copy that finishes last updates them all (its arrival publishes the others').
        if (arrivals_[part].fetch_add(1, std::memory_order_acq_rel) + 1 <
            static_cast<int>(opt.copies()))
          return;
        const ThreadCpuTimer cpu(executor_->shares_cores());
        const double begin = executor_->clock();
        opt.step();
        const double end = executor_->clock();
        updates_[r].push_back({static_cast<std::int32_t>(r), begin, end, stage, cpu.seconds()});
      };
    executor_->set_hooks(std::move(hooks));
  }

  const WorkloadSpec& spec_;
  std::vector<cpu::MicroBatch<T>> data_;
  std::vector<std::unique_ptr<cpu::PipelineRank<T>>> ranks_;
  std::unique_ptr<CpuExecutor<cpu::Tensors<T>>> executor_;
  int parts_ = 0;
  std::vector<int> part_of_;                       // stage -> model part
  std::vector<std::vector<int>> copy_rank_;        // part -> the rank of each copy
  std::vector<cpu::PartOptimizer<T>> optimizers_;  // per part
  std::vector<std::atomic<int>> arrivals_;         // per part: copies done this step
  std::vector<std::vector<UpdateEvent>> updates_;  // per rank, this step
};

template <typename T>
RunOutput run_typed(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
                    const RunOptions& o) {
  CpuRun<T> run(spec, s, plan, o);
  StepRecord last;
  RunOutput out;
  // With --check over several steps, the first step's gradients too: where the optimizer's steps
  // amplify one rounding past what the last step's comparison can judge, they still can be.
  // Copied inside that step's wall time: a --check run's timings are not the figures to quote.
  const bool keep_first = o.check && o.warmup + o.steps > 1;
  StepValues first;
  const RunTimings timings = run_steps(o.warmup, o.steps, o.progress, [&](int k, bool) {
    last = run.step(out.values.loss);
    if (keep_first && k == 0) {
      first.loss = out.values.loss;
      run.summarize(true, first);
    }
    return StepOutcome{makespan_of(last.trace), out.values.loss, ""};
  });
  // Once, after the last step: nothing of it is inside a timed step.
  run.summarize(o.keep_gradients || o.check, out.values);
  out.trace = last.trace;

  nlohmann::json r =
      run_record({&spec, &s, &plan, o.seed, o.recompute, timings, &out.trace, out.values}, "cpu");
  r["channel_capacity"] = o.executor.channel_capacity;
  std::vector<double> measured;
  for (const ActivationArena& a : last.arenas) measured.push_back(a.peak());
  r["activation_bytes"] =
      activation_bytes_json(measured, predicted_peak_bytes(s, plan, o.recompute));
  r["optimizer"] = optimizer_json(o.optimizer);
  r["provenance"]["cpu_gemm"] = cpu::gemm_library();
  std::vector<HeldMemory> held = run.held_bytes();
  for (std::size_t k = 0; k < held.size(); ++k) {
    held[k].activations = measured[k];
    held[k].comm = last.comm_peak_bytes.at(k);
  }
  r["memory"] = memory_json(
      held,
      step_memory(spec, s, plan, {o.optimizer.kind, o.recompute, o.executor.channel_capacity}));
  if (o.check)
    r["check"] =
        cpu_check(spec, o, s.params.microbatches, out.values, "", keep_first ? &first : nullptr);
  if (!o.keep_gradients) out.values.tensors.clear();
  out.record = std::move(r);
  return out;
}

}  // namespace

void require_cpu_workload(const WorkloadSpec& spec) {
  require(spec.dtype != DType::kBF16,
          "--dtype bf16 is for the CUDA backend; the CPU backend runs f32 or f64");
  if (spec.dtype == DType::kF64)
    cpu::require_exact_indices<double>(spec);
  else
    cpu::require_exact_indices<float>(spec);
}

RunOutput run_cpu(const WorkloadSpec& spec, const RunOptions& o) {
  check_step_counts(o.steps, o.warmup);
  require_cpu_workload(spec);
  const Schedule s = schedule_of(o);
  RunOptions ro = o;
  ro.executor.channel_capacity = validate_for_run(s, o.executor.channel_capacity);
  const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), o.partition);
  return spec.dtype == DType::kF64 ? run_typed<double>(spec, s, plan, ro)
                                   : run_typed<float>(spec, s, plan, ro);
}

nlohmann::json cpu_check(const WorkloadSpec& spec, const RunOptions& o, int microbatches,
                         const StepValues& got, const std::string& over, const StepValues* first) {
  const int steps = o.warmup + o.steps;
  // Held to the single-device step in the run's own precision: the same kernels and roundings,
  // so what may differ is the order a schedule sums the micro-batches' gradients in. Against
  // float64, an f32 run's gradients that are rounding noise in both (AmoebaNet's below its
  // last BatchNorms) were off by more than their own size under every schedule.
  const StepValues ref = working_precision_step(spec, microbatches, o.seed, steps, o.optimizer, {});
  const std::string reference =
      "the CPU " + std::string(spread_precision(spec.dtype) == DType::kF32 ? "f32" : "float64") +
      " single-device step" + over;
  const double tol = o.check_tolerance > 0 ? o.check_tolerance : check_tolerance(spec.dtype);
  const GradientComparison c = compare_gradients(got.tensors, ref.tensors);
  nlohmann::json j = check_json(c, tol, got.loss, ref.loss, reference);
  if (!finite_values(ref)) {
    // Nothing to hold the run to: it did not fail, and is not judged.
    not_judged(j, "the single-device step itself overflows: its loss or gradients are not finite");
    j["passed"] = true;
  } else if (spread_may_explain(j, c, o.check_tolerance)) {
    const ReferenceSpread spread =
        reference_spread(spec, microbatches, o.seed, steps, o.optimizer, ref);
    j = check_json(c, tol, got.loss, ref.loss, reference, &spread);
  }
  if (first == nullptr || j.value("judged", true)) return j;
  // The last step cannot be judged: the first can, against the reference's first step.
  RunOptions one = o;
  one.warmup = 0, one.steps = 1;
  nlohmann::json f = cpu_check(spec, one, microbatches, *first, over + ", its first step");
  j["passed"] = f["passed"];
  j["first_step"] = std::move(f);
  return j;
}

ReferenceSpread reference_spread(const WorkloadSpec& spec, int microbatches, std::uint64_t seed,
                                 int steps, const OptimizerOptions& optimizer,
                                 const StepValues& reference) {
  return measure_reference_spread(spec, microbatches, seed, steps, optimizer, reference);
}

std::optional<ReferenceSpread> cpu_reference_spread(const WorkloadSpec& spec, int microbatches,
                                                    std::uint64_t seed, int steps,
                                                    const OptimizerOptions& optimizer,
                                                    double budget_bytes, std::string* why) {
  // One step at a time: parameters, gradients, two moments, and the kept gradients of the step,
  // of its reference and of the perturbed steps (compared pairwise); bounded as float64, which
  // an f32 step stays within.
  const double needs = float64_step_bytes(spec, 5 + kPerturbedReferenceRuns);
  if (needs > budget_bytes) {
    if (why)
      *why = "not measured: the single-device step on the CPU needs about " + bytes_text(needs) +
             ", over the " + bytes_text(budget_bytes) + " it may use here";
    return std::nullopt;
  }
  try {
    // From the unperturbed step in the same precision as the perturbed ones, as cpu_check does:
    // the GPU check compares two steps of one dtype, so the gap between f32 and float64 is not
    // rounding the run may show, and counting it would loosen an f32 check for nothing.
    const StepValues ref = working_precision_step(spec, microbatches, seed, steps, optimizer, {});
    return reference_spread(spec, microbatches, seed, steps, optimizer, ref);
  } catch (const UsageError& e) {
    // A spec the CPU kernels cannot run in that precision (ids past f32's exact integers, which
    // the GPU's int32 ids hold): the GPU's check stands, without the spread.
    if (why) *why = std::string("not measured: ") + e.what();
    return std::nullopt;
  }
}

StepValues single_device_step(const WorkloadSpec& spec, int microbatches, std::uint64_t seed,
                              int steps, const OptimizerOptions& optimizer,
                              const ReferencePerturbation& perturbation) {
  return cpu::single_device_step_in<double>(spec, microbatches, seed, steps, optimizer,
                                            perturbation);
}

}  // namespace ppbench
