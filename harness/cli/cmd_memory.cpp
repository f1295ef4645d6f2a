// `ppbench memory`: the memory of one whole training step per pipeline rank, modelled
// (harness/step_memory.h): parameters, gradients, optimizer states, the schedule's peak
// activations and the tensors in flight, for a workload, a dtype, a schedule and an optimizer;
// with --backend cuda, of ppbench's CUDA layers (harness/cuda_step_memory.h).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#include "harness/cli/workload_header.h"
#include "harness/cuda_step_memory.h"
#include "harness/memory_estimate.h"
#include "harness/report_json.h"
#include "harness/step_memory.h"
#include "harness/table_unit.h"
#include "workloads/partition.h"
#include "workloads/workload_options.h"

namespace ppbench::cli {

namespace {

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

// What the optimizer term is made of, in words, for both outputs.
std::string optimizer_text(Optimizer o, const ParameterBytes& b) {
  const std::string master = b.master > 0 ? " + an fp32 master copy of the parameters (4 B)" : "";
  switch (o) {
    case Optimizer::kNone:
      return "none: no optimizer states";
    case Optimizer::kSgd:
      return "sgd: plain SGD without momentum, no moments" + master;
    case Optimizer::kAdamW:
      return "adamw: m and v at " + std::to_string((b.optimizer - b.master) / 2) + " B each" +
             master;
  }
  return "";
}

// What --backend cuda models differently, in words, for both outputs.
constexpr const char* kCudaNote =
    "ppbench's CUDA layers: gradients in fp32 whatever the dtype, and the fused attention's one "
    "f32 log-sum-exp per row and head in place of the [heads, seq, seq] probabilities.";

nlohmann::json to_json(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
                       const StepMemory& m, Optimizer o, const StepMemoryOptions& opts,
                       const std::string& backend) {
  nlohmann::json r = schedule_json(s);
  r["command"] = "memory";
  r["backend"] = backend;
  add_workload_json(r, spec);
  r["optimizer"] = to_string(o);
  r["recompute"] = opts.recompute;
  r["channel_capacity"] = opts.channel_capacity;
  r["partition"] = {{"method", plan.method}, {"layer_counts", plan.layer_counts}};
  r["model_params"] = spec.params();
  r["bytes_per_param"] = {{"params", m.per_param.param},
                          {"grads", m.per_param.grad},
                          {"optimizer", m.per_param.optimizer},
                          {"master_copy", m.per_param.master},
                          {"optimizer_note", optimizer_text(o, m.per_param)}};
  const auto bytes = [](const RankMemory& rk) {
    return nlohmann::json{{"params", rk.params},       {"grads", rk.grads},
                          {"optimizer", rk.optimizer}, {"activations", rk.activations},
                          {"comm", rk.comm},           {"total", rk.total()}};
  };
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t k = 0; k < m.ranks.size(); ++k) {
    const RankMemory& rk = m.ranks[k];
    ranks.push_back({{"rank", k},
                     {"stages", rk.stages},
                     {"parts", rk.parts},
                     {"param_count", rk.param_count},
                     {"bytes", bytes(rk)}});
  }
  r["ranks"] = ranks;
  r["sum_over_ranks"] = bytes(m.sum);
  r["sum_over_ranks"]["param_count"] = m.sum.param_count;
  r["max_total_bytes"] = m.largest_total();
  r["notes"] =
      "params and grads at the dtype; optimizer per held parameter; activations: the "
      "schedule's peak (predicted_peak_bytes; with --recompute midway through a backward that "
      "rebuilt its stage); comm: per "
      "destination, min(channel capacity + 1, messages) x the largest message (the mailbox holds "
      "the capacity, the waiting sender one more), charged to the sender. "
      "Not modelled: allocator and framework overhead, CUDA context, kernel workspaces.";
  if (backend == "cuda")
    r["notes"] = r["notes"].get<std::string>() + " --backend cuda: " + kCudaNote;
  return r;
}

void print_text(const WorkloadSpec& spec, const Schedule& s, const StepMemory& m, Optimizer o,
                const StepMemoryOptions& opts, const std::string& backend) {
  std::cout << "memory of one training step: "
            << workload_header(spec.workload, spec.config, spec.microbatch_size,
                               dtype_name(spec.dtype))
            << "\n"
            << s.params.name << " D=" << s.params.devices << " N=" << s.params.microbatches << ", "
            << s.stages() << " stages" << (opts.recompute ? ", --recompute" : "") << ", optimizer "
            << to_string(o) << "\n"
            << spec.params() << " parameters; per held parameter: params " << m.per_param.param
            << " B, grads " << m.per_param.grad << " B, optimizer " << m.per_param.optimizer
            << " B (" << optimizer_text(o, m.per_param) << ")\n"
            << (backend == "cuda" ? std::string("--backend cuda: ") + kCudaNote + "\n" : "")
            << "\n";

  // One unit for the whole table, the largest in which the largest total is at least 1.
  const Unit u = byte_unit(static_cast<double>(m.largest_total()));
  const std::string un = std::string(" ") + u.name;
  std::size_t stage_w = 7;
  for (const RankMemory& r : m.ranks) stage_w = std::max(stage_w, join(r.parts).size() + 2);
  std::printf("%4s  %-*s %14s %12s %12s %12s %12s %12s %12s\n", "rank", static_cast<int>(stage_w),
              "parts", "params held", ("params" + un).c_str(), ("grads" + un).c_str(),
              ("optim" + un).c_str(), ("activ" + un).c_str(), ("comm" + un).c_str(),
              ("total" + un).c_str());
  auto v = [&](int64_t b) { return static_cast<double>(b) / u.scale; };
  for (std::size_t k = 0; k < m.ranks.size(); ++k) {
    const RankMemory& r = m.ranks[k];
    std::printf("%4zu  %-*s %14lld %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f\n", k,
                static_cast<int>(stage_w), join(r.parts).c_str(),
                static_cast<long long>(r.param_count), v(r.params), v(r.grads), v(r.optimizer),
                v(r.activations), v(r.comm), v(r.total()));
  }
  std::cout << "\nlargest rank total: " << bytes_text(static_cast<double>(m.largest_total()))
            << " (" << m.largest_total() << " bytes)\n"
            << "parts: the partition's stages a rank holds (a part listed twice is held twice).\n"
               "activ: the schedule's peak activations"
            << (opts.recompute ? " (with the stage a backward rebuilds)" : "")
            << "; comm: tensors in flight the rank sends, per destination min("
            << opts.channel_capacity + 1 << ", messages) x the largest message (a mailbox holds "
            << opts.channel_capacity
            << ", and a sender one more while it waits).\n"
               "Not modelled: allocator and framework overhead, CUDA context, kernel workspaces.\n";
}

}  // namespace

Command add_memory(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "memory",
      "Model the memory of one training step per pipeline rank: parameters, gradients, "
      "optimizer states, peak activations and communication buffers");
  struct State {
    WorkloadFlags workload;
    ScheduleFlags schedule;
    std::string partition = "balanced";
    std::string optimizer = "adamw";
    std::string backend = "cpu";
    bool recompute = false;
    ChannelCapacityFlag channel_capacity;
    std::string format = "text";
    MemoryFlag memory;
  };
  auto st = std::make_shared<State>();
  // 16-bit by default, as `model`: the training runs this models are mixed-precision ones.
  st->workload.add_to(*app, "bf16");
  st->schedule.add_to(*app);
  app->add_option("--partition", st->partition,
                  "balanced (default), uniform, or layer counts per stage such as 4,4,3,5");
  app->add_option("--optimizer", st->optimizer,
                  "none, sgd (plain, no momentum: no moments) or adamw (default: m and v in fp32); "
                  "sgd and adamw add an fp32 master copy of the parameters with --dtype bf16")
      ->check(one_of({"none", "sgd", "adamw"}));
  app->add_option("--backend", st->backend,
                  "cpu (default: the CPU kernels, gradients in the parameters' dtype as "
                  "mixed-precision accounting counts them) or cuda (ppbench's CUDA layers: fp32 "
                  "gradients, the fused attention's log-sum-exp in place of the s x s "
                  "probabilities; bf16 or f32, no --recompute, as `run --backend cuda`)")
      ->check(one_of({"cpu", "cuda"}));
  app->add_flag("--recompute", st->recompute,
                "Keep only stage inputs between F and the backward, which rebuilds them");
  st->channel_capacity.add_to(*app, ", as `run`");
  app->add_option("--format", st->format, "text (a table per rank) or json (bytes)")
      ->check(one_of({"text", "json"}));
  st->memory.add_to(*app);
  app->footer(
      "Examples:\n"
      "  ppbench memory --workload transformer --preset llama3-8b --schedule 1f1b --devices 8 "
      "--microbatches 16\n"
      "  ppbench memory --workload mlp --layers 8 --schedule chimera --devices 4 --microbatches 8 "
      "--optimizer sgd --format json\n"
      "  ppbench memory --workload transformer --preset llama3-8b --seq 4096 --schedule 1f1b "
      "--devices 8 --microbatches 16 --backend cuda");
  return [st] {
    const Optimizer optimizer = parse_optimizer(st->optimizer);
    const bool cuda = st->backend == "cuda";
    if (cuda && st->recompute)
      throw UsageError("--recompute with --backend cuda: the CUDA backend does not recompute");
    // What the flags alone refuse, before the schedule is generated and proven (seconds at
    // thousands of ranks).
    if (cuda && parse_dtype(st->workload.dtype) == DType::kF64)
      throw UsageError("--dtype f64 with --backend cuda: the CUDA layers run bf16 or f32");
    const double layers = st->workload.layer_count();
    if (layers > 0 && layers <= std::numeric_limits<int>::max())
      check_partition_method(st->partition, static_cast<int>(layers));
    const MemoryBudget budget = st->memory.budget();
    const ScheduleParams params = st->schedule.resolve(budget);
    // Every stage needs a layer: said before the schedule is generated and proven, which may
    // take seconds (partition() says it again for what this misses).
    if (layers > 0)
      require_layers_for_stages(st->workload.workload, static_cast<std::int64_t>(layers),
                                st->schedule.stages_per_chain());
    const std::string what = "memory " + st->workload.describe() + " " + st->schedule.describe();
    // The schedule (generated and proven), then the spec's records and its partition, each
    // bounded before it is built.
    require_memory(budget, estimate_simulate(params, false), what);
    const int capacity = st->channel_capacity.resolve(st->schedule);
    const Schedule s = st->schedule.build({.channel_capacity = capacity});
    const int stages = s.placement.stages_per_chain();
    require_memory(budget, estimate_spec(st->workload.layer_count(), st->format == "json"), what);
    const WorkloadSpec spec = st->workload.build();
    const PartitionPlan plan = partition(spec, stages, st->partition);
    const StepMemoryOptions opts{optimizer, st->recompute, capacity};
    const StepMemory m =
        cuda ? cuda_step_memory(spec, s, plan, opts) : step_memory(spec, s, plan, opts);
    if (st->format == "json")
      std::cout << to_json(spec, s, plan, m, optimizer, opts, st->backend).dump(1) << '\n';
    else
      print_text(spec, s, m, optimizer, opts, st->backend);
  };
}

}  // namespace ppbench::cli
