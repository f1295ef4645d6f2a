#include <cstdio>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/heap_prefault.h"
#include "harness/chrome_trace.h"
#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#include "harness/cli/simulate_dp.h"
#include "harness/cli/simulate_workload.h"
#include "harness/memory_estimate.h"
#include "harness/metrics.h"
#include "harness/output_file.h"
#include "harness/provenance.h"
#include "harness/replay.h"
#include "harness/report_json.h"
#include "harness/simulator.h"
#include "harness/workload_costs.h"
#include "schedules/formulas.h"
#include "schedules/registry.h"

namespace ppbench::cli {

namespace {

std::string fixed(double v, int digits = 6) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

void print_text(const nlohmann::json& r, const ClosedForm& cf) {
  const bool workload = r.contains("stage_costs");
  std::cout << "schedule " << r["schedule"].get<std::string>() << "  D=" << r["devices"]
            << "  N=" << r["microbatches"] << "  chunks=" << r["chunks"]
            << "  stages=" << r["stages"] << "  actions=" << r["actions"]
            << "  parameter copies=" << r["param_copies"] << '\n';
  if (workload) {
    print_workload_costs(r);
  } else {
    const auto& c = r["costs"];
    std::cout << "costs per stage: F=" << c["F"] << " B=" << c["B"] << " I=" << c["I"]
              << " W=" << c["W"] << " FB=" << c["FB"] << " comm=" << c["comm"] << '\n';
  }
  if (r.contains("plan")) {
    // A cost-aware family's order: what it was planned for.
    const auto& p = r["plan"];
    std::cout << "planned for: F=" << p["F"] << " I=" << p["I"] << " W=" << p["W"]
              << " comm=" << p["comm"] << ", memory limit " << p["memory_limit"]
              << " M_B per rank, M_W/M_B=" << p["w_memory"] << '\n';
  }
  std::cout << '\n';
  auto line = [](const char* name, double v, const std::string& note = "") {
    std::string n(name);
    n.resize(18, ' ');
    std::cout << n << fixed(v) << note << '\n';
  };
  line("makespan", r["makespan"], workload ? " s" : "");
  line("bubble_fraction", r["bubble_fraction"],
       cf.bubble_fraction
           ? "   closed form " + cf.bubble_formula + " = " + fixed(*cf.bubble_fraction)
           : std::string());
  line("bubble_ratio", r["bubble_ratio"], "   sum idle / sum busy");
  line("zb_bubble_rate", r["zb_bubble_rate"], "   (max span - busy) / max span");
  if (!cf.idle_formula.empty()) {
    // The value first: a formula may end in its own qualifier ("..., PP = D"), which a trailing
    // "= value" would read as part of.
    std::cout << "closed-form idle per rank: ";
    if (cf.idle_per_rank) std::cout << fixed(*cf.idle_per_rank) << "   ";
    std::cout << cf.idle_formula << '\n';
  }
  if (!cf.note.empty()) std::cout << "note: " << cf.note << '\n';
  std::cout << "\nrank      busy      idle  span_idle  peak_act  share_of_A\n";
  for (const auto& rk : r["ranks"]) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%4d %9.6g %9.6g %10.6g %9d %11.4g\n", rk["rank"].get<int>(),
                  rk["busy"].get<double>(), rk["idle"].get<double>(), rk["span_idle"].get<double>(),
                  rk["peak_activations"].get<int>(), rk["peak_activation_share"].get<double>());
    std::cout << buf;
  }
  std::cout << "\npeak_act: most (stage, micro-batch) activations alive at once; share_of_A: the\n"
               "same in units of one whole-model micro-batch activation.";
  if (!cf.activations_formula.empty())
    std::cout << " Closed form: " << cf.activations_formula << ".";
  std::cout << '\n';
  if (r.contains("data_parallel")) print_data_parallel(r);
  if (workload) print_workload_memory(r);
}

// RFC 4180: a schedule read from a file is named after it, and a file name may hold a comma
// or a quote.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + '"';
}

void print_csv(const nlohmann::json& r) {
  // With --dp R > 1 each row also carries R, the throughput and the rank's all-reduce.
  const bool dp = r.contains("data_parallel");
  std::cout << "schedule,devices,microbatches,chunks,stages,makespan,bubble_fraction,bubble_ratio,"
               "zb_bubble_rate,rank,busy,idle,span_idle,peak_activations,peak_activation_share"
            << (dp ? ",replicas,throughput,allreduce_time,allreduce_bytes,exposed_allreduce" : "")
            << '\n';
  for (const auto& rk : r["ranks"]) {
    std::cout << csv_field(r["schedule"].get<std::string>()) << ',' << r["devices"] << ','
              << r["microbatches"] << ',' << r["chunks"] << ',' << r["stages"] << ','
              << fixed(r["makespan"], 17) << ',' << fixed(r["bubble_fraction"], 17) << ','
              << fixed(r["bubble_ratio"], 17) << ',' << fixed(r["zb_bubble_rate"], 17) << ','
              << rk["rank"] << ',' << fixed(rk["busy"], 17) << ',' << fixed(rk["idle"], 17) << ','
              << fixed(rk["span_idle"], 17) << ',' << rk["peak_activations"] << ','
              << fixed(rk["peak_activation_share"], 17);
    if (dp)
      std::cout << ',' << r["data_parallel"]["replicas"] << ','
                << fixed(r["data_parallel"]["throughput"], 17) << ','
                << fixed(rk["allreduce_time"], 17) << ',' << fixed(rk["allreduce_bytes"], 17) << ','
                << fixed(rk["exposed_allreduce"], 17);
    std::cout << '\n';
  }
}

}  // namespace

Command add_simulate(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "simulate",
      "Simulate one training step of a schedule under a cost model and print its metrics");
  struct State {
    ScheduleFlags schedule;
    CostFlags costs;
    std::string format = "text";
    std::string trace_out;
    CLI::Option* trace_option = nullptr;
    MemoryFlag memory;
    WorkloadCostFlags workload;
    DataParallelFlags dp;
    int cores = 0;
    std::string eager_limit;
    CLI::Option* eager_option = nullptr;
  };
  auto st = std::make_shared<State>();
  st->schedule.add_to(*app);
  st->costs.add_to(*app);
  app->add_option("--format", st->format, "text, json (one object) or csv (one row per rank)")
      ->check(one_of({"text", "json", "csv"}));
  st->trace_option = app->add_option(
      "--trace-out", st->trace_out,
      "Write the timeline as a Chrome/Perfetto trace (JSON; 1 cost unit = 1 ms): a file (replaced "
      "atomically), a device, a FIFO, or - for stdout (then instead of the report)");
  st->memory.add_to(*app);
  st->workload.add_to(*app);
  st->dp.add_to(*app);
  app->add_option("--cores", st->cores,
                  "The ranks share C cores, as the rank threads of a CPU run with more ranks than "
                  "cores do: an action waits for a free core as well as its inputs, first ready "
                  "first served (default: a device per rank)")
      ->transform(integer_in(1, 1 << 20));
  st->eager_option = app->add_option(
      "--eager-limit", st->eager_limit,
      "With --workload: hand-overs of more than BYTES (e.g. 64K, Open MPI's over TCP) go by "
      "rendezvous, as MPI sends messages past its eager limit: a tensor leaves once its receiver "
      "has reached the action that needs it and its sender is between actions, each control "
      "message taking the profile's link_latency (default: every hand-over eager)");
  app->footer(
      "Metrics (docs/metrics.md): bubble_fraction = sum idle / (ranks x makespan);\n"
      "bubble_ratio = sum idle / sum busy; zb_bubble_rate = (max span - busy) / max span;\n"
      "peak activations per rank.\n"
      "Example: ppbench simulate --schedule zb-h1 --devices 4 --microbatches 8 --cost F=1,I=1,W=1\n"
      "         ppbench simulate --schedule-file my_schedule.txt --cost F=1,I=1,W=1\n"
      "         ppbench simulate --schedule 1f1b -d 4 -n 8 --workload mlp --layers 8 --width 1024 "
      "--device-profile my_gpu.json --memory-limit-bytes 1G\n"
      "         ppbench simulate --schedule 1f1b -d 4 -n 8 --dp 2 --grad-units 3 --dp-overlap");
  return [st] {
    st->workload.check(st->costs);
    const bool with_workload = st->workload.given();
    st->dp.check(with_workload);
    const bool dp = st->dp.active();
    const StageCost cost = st->costs.resolve();
    // Everything that can be refused is refused before the work: the output, then the size.
    OutputTarget trace_out;
    if (st->trace_option->count() > 0) {
      trace_out = check_output("--trace-out", st->trace_out, OutputMode::kReplace);
      require_distinct_files({&trace_out}, {{"--schedule-file", st->schedule.schedule_file},
                                            {"--device-profile", st->workload.device_profile}});
    }
    const MemoryBudget budget = st->memory.budget();
    const bool eager_limit = st->eager_option->count() > 0;
    if (eager_limit && !with_workload)
      throw UsageError("--eager-limit needs --workload (the hand-overs' bytes come from it)");
    const double limit = eager_limit ? parse_byte_size(st->eager_limit, "--eager-limit") : 0;
    WorkloadCosts wl;
    if (with_workload) wl = load_workload(st->workload, budget);
    // A measured profile of a run that stepped an optimizer places each stage's update after its
    // last backward, as the run did: that needs the timeline, as the all-reduces do.
    const bool updates = with_workload && !wl.profile.optimizer.empty();
    const bool timeline = trace_out.given() || dp || updates;
    st->schedule.plan_for(cost);
    ScheduleParams params = st->schedule.resolve(budget);
    require_memory(
        budget, estimate_simulate(params, timeline),
        "simulate " + st->schedule.describe() + (trace_out.given() ? " --trace-out" : ""));
    // The work's memory mapped in one call, not a fault per page (core/heap_prefault.h).
    if (!timeline) prefault_heap(static_cast<std::size_t>(simulate_touched_bytes(params)));
    // A file is validated in full, its errors located by line; a generated schedule needs its
    // structure checked only, as the simulation's own walk proves it deadlock-free.
    Schedule s = st->schedule.file ? st->schedule.build() : generate(params);
    if (with_workload) {
      partition_workload(wl, st->workload, s.placement.stages_per_chain());
      // A cost-aware family plans again, for the workload's bounding stage.
      if (!st->schedule.file && find_schedule(params.name).cost_aware) {
        params.costs = planning_costs(wl);
        s = generate(params);
      }
    }
    if (!st->schedule.file) validate_structure(s);
    const bool shared = st->cores > 0 && st->cores < s.placement.ranks;
    if (eager_limit) {
      if (shared)
        throw UsageError("--eager-limit does not go with --cores " + std::to_string(st->cores) +
                         " (fewer than the " + std::to_string(s.placement.ranks) +
                         " ranks): hand-overs by rendezvous are modelled with a device per rank");
      apply_eager_limit(wl, limit);
    }
    const CostModel costs = with_workload ? schedule_cost_model(s.placement, wl.parts)
                                          : CostModel::uniform(s.stages(), cost);
    // The timeline is kept only where it is written or the all-reduces are placed on it (after
    // each stage's last backward, or each rank's last action); otherwise the metrics need none.
    Trace trace = timeline ? simulate(s, costs,
                                      {.record_comm = trace_out.given(),
                                       .optimizer_steps = updates ? optimizer_steps_after_backwards(
                                                                        s, wl.profile.optimizer)
                                                                  : std::vector<OptimizerStep>{},
                                       .cores = st->cores})
                           : Trace{};
    if (with_workload) trace.time_unit = "s";
    DataParallel replicas;
    if (dp) {
      replicas = st->dp.resolve(s, with_workload ? &wl : nullptr);
      add_allreduces(trace, s, replicas);
    }
    const Metrics m =
        timeline ? compute_metrics(trace, s.placement) : simulate_metrics(s, costs, st->cores);
    // A family's closed forms describe its own order; a file's order has none, and they assume
    // the same costs on every stage.
    ClosedForm cf;
    if (st->schedule.file)
      cf.note = "a schedule from a file has no closed form";
    else if (with_workload)
      cf.note = "closed forms assume equal costs on every stage; a workload's differ";
    else
      cf = closed_form(s.params, {cost.f, cost.b, cost.i, cost.w, cost.fb});

    nlohmann::json record = schedule_json(s);
    if (!with_workload) record["costs"] = to_json(cost);
    record.update(to_json(m));
    // The cores the ranks shared, where fewer than the ranks (null: a device per rank).
    record["cores"] = shared ? nlohmann::json(st->cores) : nlohmann::json(nullptr);
    if (with_workload) add_workload_report(record, wl, s, m);
    if (dp) record["data_parallel"] = data_parallel_json(replicas, s, m, with_workload);
    // Closed forms assume no communication time.
    record["closed_form"] = to_json(cf);
    // What else the closed forms leave out, said first in the record's note and the text's.
    auto closed_forms_leave_out = [&](const std::string& why) {
      const auto& note = record["closed_form"]["note"];
      const std::string before = note.is_string() ? note.get<std::string>() : "";
      record["closed_form"]["note"] = why + (before.empty() ? "" : "; " + before);
      cf.note = why + (cf.note.empty() ? "" : "; " + cf.note);
    };
    if (cost.comm != 0) closed_forms_leave_out("closed forms assume --comm 0");
    if (shared)
      closed_forms_leave_out("closed forms assume a device per rank, not " +
                             std::to_string(st->cores) + " shared core(s)");
    // They describe one replica's compute: the all-reduce is beyond them.
    if (dp) closed_forms_leave_out("closed forms leave out the all-reduce");
    record["provenance"] = provenance();
    if (trace_out.given())
      write_output(trace_out, to_chrome_trace(trace, schedule_json(s)).dump() + "\n");

    if (trace_out.is_stdout()) return;  // stdout carries the trace alone
    if (st->format == "json")
      std::cout << record.dump(1) << '\n';
    else if (st->format == "csv")
      print_csv(record);
    else
      print_text(record, cf);
  };
}

}  // namespace ppbench::cli
