#include "harness/cli/simulate_dp.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "core/error.h"
#include "harness/cli/options.h"
#include "harness/cost_model.h"

namespace ppbench::cli {

void DataParallelFlags::add_to(CLI::App& app) {
  dp_option = app.add_option("--dp", replicas,
                             "Data-parallel replicas R of the pipeline (" + replicas_help() +
                                 "): P = D x R processes, each stage's gradients all-reduced "
                                 "across the R replicas (a ring) after its last backward")
                  ->transform(integer_in(1, kMaxReplicas));
  overlap_option = app.add_flag(
      "--dp-overlap", overlap,
      "With --dp R, R >= 2: start each stage's all-reduce once its last backward (B, or W) has "
      "ended, one at a time per rank, instead of one all-reduce per rank after its last action");
  bandwidth_option =
      app.add_option("--dp-bandwidth", bandwidth_gbs,
                     "With --dp and --workload: GB/s (1e9 bytes/s) of each process's link to the "
                     "other replicas (default " +
                         number_text(kDefaultDpBandwidthGBs) + ", a " +
                         number_text(kDefaultDpBandwidthGBs * 8) + " Gb/s NIC; at least " +
                         number_text(kMinDpBandwidthGBs) + ", a byte a second)")
          ->transform(number_in(kMinDpBandwidthGBs, kMaxDpBandwidthGBs));
  latency_option = app.add_option("--dp-latency", latency_us,
                                  "With --dp and --workload: microseconds per ring step (default " +
                                      number_text(kDefaultDpLatencyUs) + ", >= 0)")
                       ->transform(number_in(0, kMaxDpLatencyUs));
  grad_units_option = app.add_option("--grad-units", grad_units,
                                     "With --dp and no --workload: each stage's gradient volume in "
                                     "cost units, the time one stage's gradients take to cross "
                                     "one link (>= 0, at most " +
                                         number_text(kMaxCost) +
                                         "); a ring all-reduce of R replicas takes 2 (R-1)/R "
                                         "times it")
                          ->transform(number_in(0, kMaxCost));
}

void DataParallelFlags::check(bool with_workload) const {
  for (const CLI::Option* o : {overlap_option, bandwidth_option, latency_option, grad_units_option})
    if (o->count() > 0 && dp_option->count() == 0)
      throw UsageError(o->get_name() + " needs --dp R (the data-parallel replicas)");
  require_replicas_to_overlap(replicas, overlap);
  if (!with_workload) {
    for (const CLI::Option* o : {bandwidth_option, latency_option})
      if (o->count() > 0)
        throw UsageError(o->get_name() +
                         " needs --workload (without one, --grad-units gives the all-reduce "
                         "volume in cost units)");
    if (active() && grad_units_option->count() == 0)
      throw UsageError("--dp " + std::to_string(replicas) +
                       " without --workload needs --grad-units (each stage's gradient volume in "
                       "cost units)");
  } else if (grad_units_option->count() > 0) {
    throw UsageError(
        "--grad-units does not go with --workload: the gradient bytes come from the workload's "
        "parameters (--dp-bandwidth and --dp-latency give the link)");
  }
}

DataParallel DataParallelFlags::resolve(const Schedule& s, const WorkloadCosts* workload) const {
  DataParallel dp;
  dp.replicas = replicas;
  dp.overlap = overlap;
  const Placement& p = s.placement;
  dp.stage_bytes.assign(static_cast<std::size_t>(p.stages()), grad_units);
  if (workload == nullptr) return dp;  // link: 1 volume unit per cost unit, no latency
  dp.link = {bandwidth_gbs * 1e9, latency_us / 1e6};
  const double dtype = dtype_bytes(workload->spec.dtype);
  // A schedule stage holds the layers of its position in its chain (two chains: two copies).
  for (int st = 0; st < p.stages(); ++st) {
    const int part = p.part(st);
    dp.stage_bytes[static_cast<std::size_t>(st)] =
        static_cast<double>(workload->plan.stages.at(static_cast<std::size_t>(part)).params) *
        dtype;
  }
  return dp;
}

nlohmann::json data_parallel_json(const DataParallel& dp, const Schedule& s, const Metrics& m,
                                  bool with_workload) {
  const Placement& p = s.placement;
  int microbatches = 0;
  for (int n : p.chain_microbatches) microbatches += n;
  const double per_step = static_cast<double>(dp.replicas) * microbatches;
  return {
      {"replicas", dp.replicas},
      {"pipeline_ranks", p.ranks},
      {"processes", static_cast<long long>(p.ranks) * dp.replicas},
      {"allreduce", dp.overlap ? "overlapped" : "end_of_step"},
      {"algorithm", "ring: 2 (R-1) latency + 2 (R-1)/R x volume / bandwidth"},
      {"volume_unit", with_workload ? "bytes" : "cost units"},
      {"link_bandwidth", dp.link.bandwidth},
      {"link_latency", dp.link.latency},
      {"stage_volume", dp.stage_bytes},
      {"microbatches_per_step", per_step},
      {"throughput", m.makespan > 0 ? per_step / m.makespan : 0},
      {"bubble_note",
       "bubble_fraction is one replica's; the R replicas are identical, so it is also the whole "
       "P-process job's"}};
}

void print_data_parallel(const nlohmann::json& r) {
  const auto& d = r["data_parallel"];
  const bool seconds = d["volume_unit"] == "bytes";
  const char* t = seconds ? " s" : "";
  std::printf("\ndata parallel     R=%d replicas x D=%d ranks = P=%lld processes; ring all-reduce ",
              d["replicas"].get<int>(), d["pipeline_ranks"].get<int>(),
              d["processes"].get<long long>());
  if (d["allreduce"] == "overlapped")
    std::printf("of each stage after its last backward, one at a time per rank\n");
  else
    std::printf("of each rank's stages after its last action\n");
  if (seconds)
    std::printf("link              %.6g GB/s, %.6g us per ring step\n",
                d["link_bandwidth"].get<double>() / 1e9, d["link_latency"].get<double>() * 1e6);
  else
    std::printf("link              1 volume unit per cost unit, no latency (--grad-units %.6g)\n",
                d["stage_volume"].empty() ? 0.0 : d["stage_volume"][0].get<double>());
  std::printf("allreduce_time    %.6g%s   the largest per rank (%.6g %s)\n",
              r["allreduce_time"].get<double>(), t, r["allreduce_bytes"].get<double>(),
              seconds ? "bytes" : "volume units");
  std::printf("exposed_allreduce %.6g%s   the largest per rank: after its last compute action\n",
              r["exposed_allreduce"].get<double>(), t);
  std::printf("throughput        %.6g micro-batches per %s   R x N = %.6g per step / makespan\n",
              d["throughput"].get<double>(), seconds ? "s" : "cost unit",
              d["microbatches_per_step"].get<double>());
  std::printf("note: %s\n", d["bubble_note"].get<std::string>().c_str());
  std::printf("\nrank  allreduce_time  %s  exposed_allreduce\n",
              seconds ? "allreduce_bytes" : "allreduce_units");
  for (const auto& rk : r["ranks"])
    std::printf("%4d %15.6g %16.6g %18.6g\n", rk["rank"].get<int>(),
                rk["allreduce_time"].get<double>(), rk["allreduce_bytes"].get<double>(),
                rk["exposed_allreduce"].get<double>());
}

}  // namespace ppbench::cli
