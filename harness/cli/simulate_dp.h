// `simulate --dp R [--dp-overlap]`: R data-parallel replicas of the simulated pipeline, each
// stage's gradients all-reduced across them (harness/allreduce_cost.h; docs/metrics.md, "Data
// parallelism"). The flags, their checks, the all-reduce parameters they give, and the report.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/allreduce_cost.h"
#include "harness/cli/options.h"
#include "harness/cli/simulate_workload.h"
#include "harness/metrics.h"
#include "schedules/schedule.h"

namespace ppbench::cli {

// The link between replicas when the workload path does not say otherwise: a 200 Gb/s NIC per
// GPU (25 GB/s) and 10 us per ring step, the order of a one-hop InfiniBand/RoCE message. The
// flags' help is written from these and the bounds below, so that it says what the code does.
inline constexpr double kDefaultDpBandwidthGBs = 25;
inline constexpr double kDefaultDpLatencyUs = 10;
// --dp-bandwidth from a byte a second (a finite all-reduce) to 1e9 GB/s; --dp-latency to 1e9 us.
inline constexpr double kMinDpBandwidthGBs = 1e-9;
inline constexpr double kMaxDpBandwidthGBs = 1e9;
inline constexpr double kMaxDpLatencyUs = 1e9;

struct DataParallelFlags {
  int replicas = kDefaultReplicas;
  bool overlap = false;
  double bandwidth_gbs = kDefaultDpBandwidthGBs;
  double latency_us = kDefaultDpLatencyUs;
  double grad_units = 0;
  CLI::Option* dp_option = nullptr;
  CLI::Option* overlap_option = nullptr;
  CLI::Option* bandwidth_option = nullptr;
  CLI::Option* latency_option = nullptr;
  CLI::Option* grad_units_option = nullptr;

  void add_to(CLI::App& app);
  // More than one replica: the all-reduces are simulated (R = 1 is today's simulate, unchanged).
  bool active() const { return replicas > 1; }
  // Refuses a --dp-* flag without --dp, --dp-overlap with --dp 1, the link flags without
  // --workload (without one the volume is in cost units: --grad-units), --grad-units with
  // --workload, and --dp R > 1 without a volume.
  void check(bool with_workload) const;
  // The all-reduce parameters for schedule `s`: with a workload each stage's parameters x dtype
  // bytes over --dp-bandwidth and --dp-latency (seconds); without, --grad-units per stage over a
  // link of 1 volume unit per cost unit and no latency.
  DataParallel resolve(const Schedule& s, const WorkloadCosts* workload) const;
};

// The record's "data_parallel" object: R, D, P = D x R, the link, the per-stage volume, the
// throughput R x N / makespan and what the bubble means for the P-process job.
nlohmann::json data_parallel_json(const DataParallel& dp, const Schedule& s, const Metrics& m,
                                  bool with_workload);
// Its text, after the metric lines.
void print_data_parallel(const nlohmann::json& record);

}  // namespace ppbench::cli
