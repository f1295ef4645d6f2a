// `ppbench model`: print a workload's spec (per-layer parameters, FLOPs of F/I/W, activation bytes
// and stage-boundary bytes per micro-batch) and, with --stages, its partition into stages.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#include "harness/cli/workload_header.h"
#include "harness/memory_estimate.h"
#include "harness/table_unit.h"
#include "workloads/cuda/attention_note.h"
#include "workloads/partition.h"
#include "workloads/spec_json.h"
#include "workloads/workload_options.h"

namespace ppbench::cli {

namespace {

// How each backend computes the s x s part of attention: it decides the activation memory of a
// real run, so the model says it beside the byte counts (the issue asks for it on the GPU side).
constexpr const char* kCpuAttention =
    "materialises the s x s probabilities per (batch, head) and keeps them until I";
std::string cuda_attention() {
#if PPBENCH_HAVE_CUDA || defined(PPBENCH_CUDA_PROGRAM)
  return cuda::kAttentionNote;
#else
  return std::string("not compiled in (would be: ") + cuda::kAttentionNote + ")";
#endif
}

// 8030261248 -> "8.03 B"; three significant digits, thousands-based units; past 999 T in
// scientific notation ("8.00e+18").
std::string count_text(double v) {
  const char* units[] = {"", " K", " M", " B", " T"};
  char buf[32];
  if (std::fabs(v) >= 999.5e12) {
    std::snprintf(buf, sizeof buf, "%.2e", v);
    return buf;
  }
  int u = 0;
  while (std::fabs(v) >= 999.5 && u < 4) v /= 1000, ++u;
  const int decimals = u == 0 ? 0 : std::fabs(v) < 9.995 ? 2 : std::fabs(v) < 99.95 ? 1 : 0;
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, v, units[u]);
  return buf;
}

std::string pad(std::string s, std::size_t width, bool right = true) {
  if (s.size() >= width) return s + " ";
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

std::string num(double v, const Unit& u) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v / u.scale);
  return buf;
}

struct Row {
  std::string index, name, kind;
  int64_t params;
  Flops flops;
  ActivationBytes act;    // what ppbench's kernels keep
  ActivationBytes paper;  // Zero Bubble / Korthikanti's formula
  int64_t boundary;
};

void print_rows(const std::vector<Row>& rows, const Row& total) {
  double max_flop = 0, max_byte = 0;
  std::size_t name_w = 6, kind_w = 5;
  for (const auto& r : rows) {
    max_flop = std::max({max_flop, r.flops.f, r.flops.i, r.flops.w});
    max_byte = std::max({max_byte, static_cast<double>(r.act.b), static_cast<double>(r.act.w),
                         static_cast<double>(r.paper.b), static_cast<double>(r.paper.w),
                         static_cast<double>(r.boundary)});
    name_w = std::max(name_w, r.name.size() + 2);
    kind_w = std::max(kind_w, r.kind.size() + 2);
  }
  max_flop = std::max({max_flop, total.flops.f, total.flops.i, total.flops.w});
  max_byte = std::max({max_byte, static_cast<double>(total.act.b), static_cast<double>(total.act.w),
                       static_cast<double>(total.paper.b), static_cast<double>(total.paper.w)});
  // One unit per column set, in which the largest value keeps five digits before the point, so
  // that a layer's small values beside the total keep theirs. Prefer GFLOP for model-sized
  // numbers, as papers quote them.
  constexpr double kBelow = 100000;
  const Unit fu = max_flop >= 1e9 ? Unit{"GFLOP", 1e9} : table_unit(max_flop, kFlopUnits, kBelow);
  const Unit bu = byte_unit(max_byte, kBelow);
  const std::string f = std::string(" ") + fu.name, b = std::string(" ") + bu.name;
  std::cout << pad("#", 5) << "  " << pad("name", name_w, false) << pad("kind", kind_w, false)
            << pad("params", 10) << pad("F" + f, 13) << pad("I" + f, 13) << pad("W" + f, 13)
            << pad("M_B" + b, 12) << pad("M_W" + b, 12) << pad("paper M_B", 12)
            << pad("paper M_W", 12) << pad("out" + b, 12) << '\n';
  auto line = [&](const Row& r) {
    std::cout << pad(r.index, 5) << "  " << pad(r.name, name_w, false) << pad(r.kind, kind_w, false)
              << pad(count_text(static_cast<double>(r.params)), 10) << pad(num(r.flops.f, fu), 13)
              << pad(num(r.flops.i, fu), 13) << pad(num(r.flops.w, fu), 13)
              << pad(num(static_cast<double>(r.act.b), bu), 12)
              << pad(num(static_cast<double>(r.act.w), bu), 12)
              << pad(num(static_cast<double>(r.paper.b), bu), 12)
              << pad(num(static_cast<double>(r.paper.w), bu), 12)
              << pad(num(static_cast<double>(r.boundary), bu), 12) << '\n';
  };
  for (const auto& r : rows) line(r);
  line(total);
}

void print_text(const WorkloadSpec& spec, const PartitionPlan* plan) {
  std::cout << workload_header(spec.workload, spec.config, spec.microbatch_size,
                               dtype_name(spec.dtype))
            << "\n"
            << spec.layers.size() << " layers, " << count_text(static_cast<double>(spec.params()))
            << " params (" << spec.params() << "); FLOPs and bytes per micro-batch\n\n";

  std::vector<Row> rows;
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    rows.push_back({std::to_string(i), l.name, std::string(layer_kind_name(l.kind)), l.params,
                    l.flops, l.activation, l.paper_activation, l.boundary_bytes()});
  }
  const Row total{
      "", "total", "", spec.params(), spec.flops(), spec.activation(), spec.paper_activation(), 0};
  print_rows(rows, total);

  if (plan) {
    std::cout << "\npartition " << plan->method << " into " << plan->stages.size()
              << " stages (cost = F + I + W FLOPs)\n\n";
    std::vector<Row> stages;
    for (std::size_t s = 0; s < plan->stages.size(); ++s) {
      const StageSpec& st = plan->stages[s];
      const std::string first = spec.layers[st.first_layer].name;
      const std::string last = spec.layers[st.first_layer + st.num_layers - 1].name;
      ActivationBytes paper;
      for (int i = st.first_layer; i < st.first_layer + st.num_layers; ++i)
        paper += spec.layers[i].paper_activation;
      stages.push_back({std::to_string(s), first == last ? first : first + ".." + last,
                        std::to_string(st.num_layers) + " layers", st.params, st.flops,
                        st.activation, paper, st.boundary_bytes_out});
    }
    print_rows(stages, total);
  }
  std::cout << "\nM_B: activation bytes F keeps for the backward; M_W: bytes held from I until W;\n"
               "both as ppbench's kernels keep them (what a run measures). paper M_B, M_W: the\n"
               "same by Zero Bubble / Korthikanti et al.'s formula (dropout masks included when\n"
               "the workload has dropout), in the same unit.\n"
               "out: bytes sent to the next layer/stage. FLOPs count matrix products only "
               "(Zero Bubble's convention).\n";
  if (spec.workload == "transformer") {
    std::cout << "\nattention, --backend cpu: " << kCpuAttention
              << "\nattention, --backend cuda: " << cuda_attention() << "\n";
  }
}

}  // namespace

Command add_model(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "model",
      "Print a workload's layers (params, FLOPs of F/I/W, activation bytes) and its "
      "partition into pipeline stages");
  struct State {
    WorkloadFlags workload;
    int stages = 0;
    std::string partition = "balanced";
    std::string format = "text";
    MemoryFlag memory;
  };
  auto st = std::make_shared<State>();
  // 16-bit by default: the papers' memory figures (Zero Bubble's M_B, M_W) are for 16 bits.
  st->workload.add_to(*app, "bf16");
  auto* stages_opt =
      app->add_option("-S,--stages", st->stages, "Pipeline stages to partition the layers into")
          ->transform(integer_in(1, 1 << 20));
  auto* partition_opt = app->add_option(
      "--partition", st->partition,
      "balanced (default: minimise the largest stage's F+I+W FLOPs), uniform (equal layer counts, "
      "leftovers to the first stages) or layer counts per stage, e.g. 4,4,3,5");
  app->add_option("--format", st->format, "text (a table) or json")
      ->check(one_of({"text", "json"}));
  st->memory.add_to(*app);
  app->footer(
      "Examples:\n"
      "  ppbench model --workload transformer --preset llama3-8b\n"
      "  ppbench model --workload amoebanet --layers 18 --filters 256 --stages 4 --format json\n"
      "  ppbench model --workload mlp --layers 8 --width 512 --stages 4 --partition 1,2,2,3");
  return [st, stages_opt, partition_opt] {
    int stages = st->stages;
    if (stages_opt->count() == 0) {
      stages = stages_in_list(st->partition);
      if (partition_opt->count() > 0 && stages == 0)
        throw UsageError("--partition " + quoted(st->partition) + " needs --stages");
    }
    // The spec has a record per layer (never one per parameter): bound them before building.
    require_memory(st->memory.budget(),
                   estimate_spec(st->workload.layer_count(), st->format == "json"),
                   "model " + st->workload.describe() +
                       (stages > 0 ? " --stages " + std::to_string(stages) : ""));
    const WorkloadSpec spec = st->workload.build();
    PartitionPlan plan;
    if (stages_opt->count() > 0 || stages > 0) plan = partition(spec, stages, st->partition);
    const bool partitioned = !plan.stages.empty();

    if (st->format == "json") {
      nlohmann::json out = to_json(spec);
      if (spec.workload == "transformer")
        out["attention"] = {{"cpu", kCpuAttention}, {"cuda", cuda_attention()}};
      if (partitioned) {
        const nlohmann::json p = to_json(plan, spec);
        out["partition"] = {{"method", p["method"]},
                            {"layer_counts", p["layer_counts"]},
                            {"max_stage_flops", p["max_stage_flops"]}};
        out["stages"] = p["stages"];
      }
      std::cout << out.dump(1) << '\n';
    } else {
      print_text(spec, partitioned ? &plan : nullptr);
    }
  };
}

}  // namespace ppbench::cli
