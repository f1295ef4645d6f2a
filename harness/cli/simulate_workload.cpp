#include "harness/cli/simulate_workload.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "harness/backends/run_record.h"
#include "harness/cli/workload_header.h"
#include "harness/memory_estimate.h"
#include "harness/workload_costs.h"
#include "workloads/spec_json.h"

namespace ppbench::cli {

void WorkloadCostFlags::add_to(CLI::App& app) {
  workload.add_to(app, "f32");
  // simulate runs without a workload too (uniform --cost): the flag is optional here.
  workload_option = app.get_option("--workload");
  workload_option->required(false);
  workload_option->description(
      "Derive per-stage costs from this workload (mlp, amoebanet or transformer) instead of "
      "--cost: its FLOPs and bytes at --device-profile's rates");
  partition_option = app.add_option(
      "--partition", partition,
      "With --workload: balanced (default), uniform, or layer counts per stage such as 4,4,3,5");
  profile_option = app.add_option(
      "--device-profile", device_profile,
      "With --workload: a JSON device profile, rates (peak_flops, memory_bandwidth, "
      "link_bandwidth, link_latency) or per-stage times from run --profile-out. Default: the "
      "built-in default-cpu rates");
  limit_option = app.add_option(
      "--memory-limit-bytes", memory_limit_bytes,
      "With --workload: activation bytes each rank may hold (e.g. 512M, 16G); the report says "
      "which ranks' predicted peak is over it");
  for (const auto& [name, value] : workload.values) workload_only.push_back(app.get_option(name));
  for (const char* name : {"--preset", "--microbatch-size", "--dtype"})
    workload_only.push_back(app.get_option(name));
  workload_only.insert(workload_only.end(), {partition_option, profile_option, limit_option});
}

void WorkloadCostFlags::check(const CostFlags& costs) const {
  if (!given()) {
    for (const CLI::Option* o : workload_only)
      if (o->count() > 0)
        throw UsageError(o->get_name() + " needs --workload (costs from a workload)");
    return;
  }
  if (costs.cost_option->count() > 0 || costs.comm != 0)
    throw UsageError(
        "--cost and --comm do not go with --workload: the costs come from the workload and "
        "--device-profile");
}

namespace {

// A measured profile's times hold for the workload they were measured on, nothing else.
void check_measured_for(const DeviceProfile& p, const WorkloadSpec& spec,
                        bool microbatch_size_varies = false) {
  const nlohmann::json have = {{"workload", spec.workload},
                               {"workload_config", spec.config},
                               {"microbatch_size", spec.microbatch_size},
                               {"dtype", std::string(dtype_name(spec.dtype))}};
  for (const auto& [key, value] : have.items())
    if (p.measured_for.at(key) != value && !(microbatch_size_varies && key == "microbatch_size"))
      throw UsageError("--device-profile " + quoted(p.source) + " was measured with " + key + " " +
                       p.measured_for.at(key).dump() + ", not " + value.dump() + " as given here");
}

}  // namespace

WorkloadCosts load_workload(const WorkloadCostFlags& flags, const MemoryBudget& budget,
                            const std::string& command, bool microbatch_size_varies) {
  WorkloadCosts w;
  w.profile = flags.profile_option->count() > 0 ? read_device_profile(flags.device_profile)
                                                : default_profile();
  if (flags.limit_option->count() > 0)
    w.memory_limit = parse_byte_size(flags.memory_limit_bytes, "--memory-limit-bytes");
  require_memory(budget, estimate_spec(flags.workload.layer_count(), false),
                 command + " " + flags.workload.describe());
  w.spec = flags.workload.build();
  if (w.profile.kind == "measured") check_measured_for(w.profile, w.spec, microbatch_size_varies);
  return w;
}

void partition_workload(WorkloadCosts& w, const WorkloadCostFlags& flags, int stages) {
  std::string method = flags.partition;
  if (w.profile.kind == "measured") {
    const auto& counts = w.profile.measured_for["layer_counts"];
    if (static_cast<int>(counts.size()) != stages)
      throw UsageError("--device-profile " + quoted(w.profile.source) + " was measured for " +
                       std::to_string(counts.size()) + " stages (layer_counts " + counts.dump() +
                       "), this schedule has " + std::to_string(stages) + " per chain");
    std::string list;
    for (const auto& n : counts) list += (list.empty() ? "" : ",") + n.dump();
    if (flags.partition_option->count() == 0) method = list;
    const PartitionPlan plan = partition(w.spec, stages, method);
    if (plan.layer_counts != counts.get<std::vector<int>>())
      throw UsageError("--device-profile " + quoted(w.profile.source) +
                       " was measured with layer_counts " + counts.dump() + ", not --partition " +
                       flags.partition + " (leave --partition out to use the profile's)");
  }
  w.plan = partition(w.spec, stages, method);
  w.parts = stage_costs(w.spec, w.plan, w.profile);
  w.bounding = bounding_stage(w.parts);
}

void apply_eager_limit(WorkloadCosts& w, double limit) {
  w.eager_limit = limit;
  go_by_rendezvous(w.parts, w.plan, limit, w.profile.rates.link_latency);
}

PlanningCosts planning_costs(const WorkloadCosts& w) {
  const StageCost& c = w.parts.at(static_cast<std::size_t>(w.bounding));
  // The last stage hands nothing on: plan for the slowest hand-over of the pipeline.
  double comm = 0;
  for (const StageCost& p : w.parts) comm = std::max(comm, p.comm);
  return {1, c.i / c.f, c.w / c.f, comm / c.f};
}

void add_workload_report(nlohmann::json& r, const WorkloadCosts& w, const Schedule& s,
                         const Metrics& m) {
  r["time_unit"] = "s";
  r["workload"] = {{"name", w.spec.workload},
                   {"config", w.spec.config},
                   {"microbatch_size", w.spec.microbatch_size},
                   {"dtype", std::string(dtype_name(w.spec.dtype))}};
  r["partition"] = {{"method", w.plan.method}, {"layer_counts", w.plan.layer_counts}};
  r["device_profile"] = to_json(w.profile);
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t k = 0; k < w.parts.size(); ++k) {
    const StageCost& c = w.parts[k];
    const StageSpec& st = w.plan.stages[k];
    stages.push_back({{"stage", k},
                      {"first_layer", st.first_layer},
                      {"layers", st.num_layers},
                      {"F", c.f},
                      {"I", c.i},
                      {"W", c.w},
                      {"B", c.b},
                      {"FB", c.fb},
                      {"comm", c.comm}});
  }
  if (!w.profile.optimizer.empty())
    for (std::size_t k = 0; k < stages.size(); ++k)
      stages[k]["optimizer"] = w.profile.optimizer.at(k);
  // A measured profile's send calls and receives, where it has them (rates profiles have none).
  for (std::size_t k = 0; k < stages.size(); ++k) {
    if (w.parts[k].send > 0) stages[k]["send"] = w.parts[k].send;
    if (w.parts[k].recv > 0) stages[k]["recv"] = w.parts[k].recv;
  }
  if (w.eager_limit > 0) {
    nlohmann::json rendezvous = nlohmann::json::array();
    for (std::size_t k = 0; k + 1 < w.parts.size(); ++k) {
      stages[k]["handover_bytes"] = w.plan.stages[k].boundary_bytes_out;
      stages[k]["rendezvous"] = w.parts[k].rendezvous;
      if (w.parts[k].rendezvous) rendezvous.push_back(k);
    }
    r["hand_overs"] = {
        {"eager_limit_bytes", w.eager_limit},
        {"handshake_s", w.profile.rates.link_latency},
        {"rendezvous_after_stages", std::move(rendezvous)},
        {"model",
         "past the eager limit a tensor leaves once its receiver has reached the action that "
         "needs it and its sender is between actions; each of the two control messages takes "
         "handshake_s"}};
  }
  r["stage_costs"] = std::move(stages);
  const StageCost& b = w.parts[static_cast<std::size_t>(w.bounding)];
  r["bounding_stage"] = {{"stage", w.bounding},
                         {"F_plus_B", b.f + b.b},
                         {"definition", "the partition stage with the largest F + B"}};
  std::size_t busiest = 0;
  for (std::size_t k = 1; k < m.ranks.size(); ++k)
    if (m.ranks[k].busy > m.ranks[busiest].busy) busiest = k;
  r["busiest_rank"] = {{"rank", busiest},
                       {"busy", m.ranks[busiest].busy},
                       {"share_of_makespan", m.ranks[busiest].busy / m.makespan},
                       {"definition",
                        "the rank with the largest busy time: no order of this placement under "
                        "these costs takes less than it"}};
  const std::vector<double> peaks = predicted_peak_bytes(s, w.plan, false);
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json over = nlohmann::json::array();
  for (std::size_t k = 0; k < peaks.size(); ++k) {
    nlohmann::json e = {{"rank", k}, {"peak_bytes", peaks[k]}};
    if (w.memory_limit > 0) {
      e["over_limit"] = peaks[k] > w.memory_limit;
      if (peaks[k] > w.memory_limit) over.push_back(k);
    }
    ranks.push_back(std::move(e));
  }
  r["activation_memory"] = {{"ranks", std::move(ranks)},
                            {"model", "predicted peak activation bytes (run's memory model)"}};
  if (w.memory_limit > 0) {
    r["activation_memory"]["limit_bytes"] = w.memory_limit;
    r["activation_memory"]["over_limit_ranks"] = std::move(over);
  }
}

void print_workload_costs(const nlohmann::json& r) {
  const auto& wl = r["workload"];
  std::cout << "workload "
            << workload_header(wl["name"].get<std::string>(), wl["config"],
                               wl["microbatch_size"].get<std::int64_t>(),
                               wl["dtype"].get<std::string>())
            << ", partition " << r["partition"]["method"].get<std::string>() << ' '
            << r["partition"]["layer_counts"].dump() << '\n';
  const auto& p = r["device_profile"];
  std::cout << "device profile: " << p["name"].get<std::string>() << " ("
            << p["source"].get<std::string>() << ", " << p["kind"].get<std::string>();
  if (p.contains("rates")) {
    const auto& x = p["rates"];
    std::printf(": peak %.4g FLOP/s, memory %.4g B/s, link %.4g B/s + %.4g s",
                x["peak_flops"].get<double>(), x["memory_bandwidth"].get<double>(),
                x["link_bandwidth"].get<double>(), x["link_latency"].get<double>());
  }
  std::cout << ")\ncosts per stage in seconds (comm: hand-over to the next stage):\n";
  std::printf("stage layers %11s %11s %11s %11s %11s %11s\n", "F", "I", "W", "B", "FB", "comm");
  for (const auto& c : r["stage_costs"])
    std::printf("%5d %6d %11.4g %11.4g %11.4g %11.4g %11.4g %11.4g\n", c["stage"].get<int>(),
                c["layers"].get<int>(), c["F"].get<double>(), c["I"].get<double>(),
                c["W"].get<double>(), c["B"].get<double>(), c["FB"].get<double>(),
                c["comm"].get<double>());
  for (const auto& c : r["stage_costs"]) {
    if (c.contains("send"))
      std::printf("stage %d: each send call across its boundary holds its rank %.4g s\n",
                  c["stage"].get<int>(), c["send"].get<double>());
    if (c.contains("recv"))
      std::printf("stage %d: taking in each input from another rank holds its rank %.4g s\n",
                  c["stage"].get<int>(), c["recv"].get<double>());
  }
  if (r.contains("hand_overs")) {
    const auto& h = r["hand_overs"];
    std::printf(
        "hand-overs past %.0f bytes go by rendezvous (handshake %.4g s): after stage(s) %s\n",
        h["eager_limit_bytes"].get<double>(), h["handshake_s"].get<double>(),
        h["rendezvous_after_stages"].empty() ? "none"
                                             : h["rendezvous_after_stages"].dump().c_str());
  }
  const auto& b = r["bounding_stage"];
  const auto& k = r["busiest_rank"];
  std::printf("bounding stage: %d (the largest F+B per micro-batch, %.4g s)\n",
              b["stage"].get<int>(), b["F_plus_B"].get<double>());
  std::printf(
      "busiest rank: %d (busy %.4g s, %.4g of the makespan: no order of this placement is "
      "shorter than its busy time)\n",
      k["rank"].get<int>(), k["busy"].get<double>(), k["share_of_makespan"].get<double>());
}

void print_workload_memory(const nlohmann::json& r) {
  const auto& m = r["activation_memory"];
  const bool limited = m.contains("limit_bytes");
  std::cout << "\nrank  peak activation bytes";
  if (limited) std::cout << "  over " << bytes_text(m["limit_bytes"].get<double>()) << "?";
  std::cout << '\n';
  for (const auto& e : m["ranks"]) {
    std::printf("%4d  %21s", e["rank"].get<int>(),
                bytes_text(e["peak_bytes"].get<double>()).c_str());
    if (limited) std::cout << (e["over_limit"].get<bool>() ? "  OVER" : "  ok");
    std::cout << '\n';
  }
  if (limited)
    std::cout << (m["over_limit_ranks"].empty()
                      ? "every rank fits --memory-limit-bytes\n"
                      : "ranks over --memory-limit-bytes: " + m["over_limit_ranks"].dump() + "\n");
}

}  // namespace ppbench::cli
