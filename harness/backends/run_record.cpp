#include "harness/backends/run_record.h"

#include <algorithm>
#include <optional>
#include <string>

#include "harness/metrics.h"
#include "harness/provenance.h"
#include "harness/replay.h"
#include "harness/report_json.h"
#include "harness/simulator.h"

namespace ppbench {

double makespan_of(const Trace& t) {
  double t0 = 1e300, t1 = -1e300;
  for (const auto& e : t.compute) t0 = std::min(t0, e.start), t1 = std::max(t1, e.end);
  for (const auto& e : t.collectives) t1 = std::max(t1, e.end);
  for (const auto& e : t.updates) t1 = std::max(t1, e.end);
  return t.compute.empty() ? 0 : t1 - t0;
}

std::vector<double> predicted_peak_bytes(const Schedule& s, const PartitionPlan& plan,
                                         bool recompute) {
  const Placement& p = s.placement;
  auto part = [&](int stage) { return plan.stages[p.part(stage)]; };
  std::vector<double> peak(p.ranks, 0);
  for (int r = 0; r < p.ranks; ++r) {
    double live = 0;
    auto apply = [&](const Task& t) {
      const StageSpec& st = part(t.stage);
      const double input =
          p.is_first(t.stage) ? 0 : static_cast<double>(part(t.stage - 1).boundary_bytes_out);
      const double full = static_cast<double>(st.activation.b);
      const double mb = recompute ? input : full;
      const double mw = static_cast<double>(st.activation.w);
      // With recompute a backward first rebuilds the stage's activations from its kept input:
      // its peak is midway, before the layers free them again. A forward holds them all until
      // it ends, and only then keeps just its input.
      if (recompute && (t.op == Op::B || t.op == Op::I))
        peak[r] = std::max(peak[r], live - mb + full);
      if (recompute && t.op == Op::F) peak[r] = std::max(peak[r], live + full);
      switch (t.op) {
        case Op::F:
          live += mb;
          break;
        case Op::B:
          live -= mb;
          break;
        case Op::I:
          live += mw - mb;
          break;
        case Op::W:
          live -= mw;
          break;
      }
    };
    for (const Action& a : s.ranks[r]) {
      apply(a.task);
      if (a.paired()) {
        // Between an overlapped pair's halves the new forward's activations and the backward's
        // micro-batch's are held at once.
        peak[r] = std::max(peak[r], live);
        apply(a.partner);
      }
      peak[r] = std::max(peak[r], live);
    }
  }
  return peak;
}

namespace {

// What "predicted" is: the plain replay, or where the ranks (threads, or processes of one node)
// outnumbered their cores the replay on those cores.
std::string replay_note(int shared_cores) {
  if (shared_cores == 0) return "the simulator replaying this step's measured per-op costs";
  return "the simulator replaying this step on the " + std::to_string(shared_cores) +
         " core(s) its ranks shared: per-op CPU time (plus each rank's executor work "
         "spread over its actions), an action waiting for a free core as well as its inputs";
}

}  // namespace

nlohmann::json run_record(const StepSummary& in, const char* backend) {
  const WorkloadSpec& spec = *in.spec;
  const Schedule& s = *in.schedule;
  const Metrics measured = compute_metrics(*in.trace, s.placement);
  // The optimizer steps are replayed where they ran: after a stage's last backward (threads,
  // GPUs), or at the end of the step, after the all-reduces (processes).
  const std::vector<OptimizerStep> updates = optimizer_steps_from_trace(*in.trace, s.placement);
  // Rank threads that outnumbered their cores are replayed on those cores, from CPU times.
  SimulateOptions replay_options{.record_comm = false, .cores = in.trace->shared_cores};
  if (in.replicas == 1) replay_options.optimizer_steps = updates;
  Trace replay = simulate(s, costs_from_trace(*in.trace, s.placement), replay_options);
  // Data parallelism: the replay's all-reduces over a ring link fitted to the measured ones.
  std::optional<DataParallel> dp;
  if (in.replicas > 1) {
    dp = data_parallel_from_trace(*in.trace, s, in.replicas, in.dp_overlap);
    add_allreduces(replay, s, *dp);
    add_updates_after_allreduces(replay, updates);
  }
  const Metrics predicted = compute_metrics(replay, s.placement);
  const RunTimings& t = in.timings;
  const double step = median_of(t.makespan_s), wall = median_of(t.wall_s);
  const double samples = static_cast<double>(s.params.microbatches * spec.microbatch_size);

  nlohmann::json r = schedule_json(s);
  r["command"] = "run";
  r["backend"] = backend;
  add_workload_json(r, spec);
  r["steps"] = t.steps;
  r["warmup"] = t.warmup;
  r["seed"] = in.seed;
  r["recompute"] = in.recompute;
  r["partition"] = {{"method", in.plan->method}, {"layer_counts", in.plan->layer_counts}};
  r["params"] = spec.params();
  // step_time_s: the median compute makespan of the measured steps (what the metrics describe);
  // step_time.wall_s: what the process spends per step around it (zeroing gradients, starting
  // rank threads, reading the loss), the figure a user's own run pays.
  r["step_time_s"] = step;
  r["step_times_s"] = t.makespan_s;
  r["step_time"] = {{"makespan_s", spread_json(t.makespan_s)},
                    {"wall_s", spread_json(t.wall_s)},
                    {"wall_times_s", t.wall_s}};
  r["throughput"] = {{"samples_per_s", samples / step}, {"wall_samples_per_s", samples / wall}};
  if (spec.workload == "transformer") {
    const double tokens = samples * static_cast<double>(spec.input.shape.at(1));
    r["throughput"]["tokens_per_s"] = tokens / step;
    r["throughput"]["wall_tokens_per_s"] = tokens / wall;
  }
  r["measured"] = to_json(measured);
  r["measured"]["covers"] = "the last measured step (step " + std::to_string(t.warmup + t.steps) +
                            ": " + std::to_string(t.warmup) + " warm-up, " +
                            std::to_string(t.steps) + " measured)";
  // Where each rank's thread ran: its own CPU (pinned), or null where the OS placed the threads.
  r["measured"]["pinned_cpus"] = in.trace->pinned_cpus.empty()
                                     ? nlohmann::json(nullptr)
                                     : nlohmann::json(in.trace->pinned_cpus);
  r["predicted"] = to_json(predicted);
  const int cores = in.trace->shared_cores;
  r["predicted"]["note"] = replay_note(cores);
  r["predicted"]["cores"] = cores > 0 ? nlohmann::json(cores) : nlohmann::json(nullptr);
  const HandOver hand_over = hand_over_from_trace(*in.trace);
  r["predicted"]["hand_over"] = {
      {"delay_s", hand_over.delay}, {"receive_s", hand_over.receive}, {"send_s", hand_over.send}};
  if (dp)
    r["predicted"]["allreduce_link"] = {
        {"bandwidth_bytes_per_s", dp->link.bandwidth},
        {"note", "a ring link fitted to this step's measured all-reduces (simulate --dp " +
                     std::to_string(dp->replicas) +
                     " --dp-bandwidth with it in GB/s predicts "
                     "the same)"}};
  r["fidelity"] = {{"bubble_fraction_gap", measured.bubble_fraction - predicted.bubble_fraction}};
  r["loss"] = in.values.loss;
  r["grad_norm"] = in.values.grad_norm();
  r["gradients"] = in.values.gradients_json();
  r["provenance"] = provenance();
  return r;
}

nlohmann::json memory_json(const std::vector<HeldMemory>& measured, const StepMemory& model) {
  // The same five terms and their total on both sides.
  const auto terms = [](const auto& t) -> nlohmann::json {
    return {{"params", t.params},
            {"grads", t.grads},
            {"optimizer", t.optimizer},
            {"activations", t.activations},
            {"comm", t.comm},
            {"total", t.params + t.grads + t.optimizer + t.activations + t.comm}};
  };
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t r = 0; r < measured.size(); ++r)
    ranks.push_back(
        {{"rank", r}, {"measured", terms(measured[r])}, {"model", terms(model.ranks.at(r))}});
  return {{"ranks", ranks},
          {"note",
           "measured: the bytes of the rank's parameter, gradient and optimizer-state tensors "
           "after the last step, its activation arena's peak, and the most bytes it had sent "
           "that were not yet taken in the last step; model: " +
               std::string(model.model) + " (docs/metrics.md)"}};
}

}  // namespace ppbench
