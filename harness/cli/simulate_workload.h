// `simulate --workload ...`: per-stage costs from a workload's FLOPs and bytes at a device
// profile's rates (or a measured profile's times), the activation bytes per rank against
// --memory-limit-bytes, and what the report says about them (docs/metrics.md, "Costs from a
// workload").
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/cli/options.h"
#include "harness/device_profile.h"
#include "harness/metrics.h"
#include "schedules/schedule.h"
#include "workloads/partition.h"
#include "workloads/workload_options.h"

namespace ppbench::cli {

struct WorkloadCostFlags {
  WorkloadFlags workload;
  std::string partition = "balanced";
  std::string device_profile;
  std::string memory_limit_bytes;
  CLI::Option* workload_option = nullptr;
  CLI::Option* partition_option = nullptr;
  CLI::Option* profile_option = nullptr;
  CLI::Option* limit_option = nullptr;
  std::vector<CLI::Option*> workload_only;  // every flag that needs --workload

  void add_to(CLI::App& app);
  bool given() const { return workload_option->count() > 0; }
  // Refuses a workload flag without --workload, and --cost/--comm with it (the workload and the
  // profile give the costs).
  void check(const CostFlags& costs) const;
};

struct WorkloadCosts {
  WorkloadSpec spec;
  PartitionPlan plan;
  DeviceProfile profile;
  std::vector<StageCost> parts;  // per partition stage, seconds
  int bounding = 0;              // bounding_stage(parts)
  double memory_limit = 0;       // bytes per rank; 0: none given
  double eager_limit = 0;        // bytes past which hand-overs go by rendezvous; 0: none given
};

// Reads the profile and the limit (refusing bad ones before any work) and builds the spec;
// `command` names the subcommand in a refusal for memory. `microbatch_size_varies` (tune with
// --global-batch): a measured profile's micro-batch size is not held to the flags' (each
// candidate's cut holds it to its own).
WorkloadCosts load_workload(const WorkloadCostFlags& flags, const MemoryBudget& budget,
                            const std::string& command = "simulate",
                            bool microbatch_size_varies = false);
// Cuts the workload into `stages` stages (a measured profile's layer counts unless --partition is
// given) and derives the per-stage costs.
void partition_workload(WorkloadCosts& w, const WorkloadCostFlags& flags, int stages);

// simulate --eager-limit: the hand-overs past `limit` bytes go by rendezvous, each control message
// taking the profile's link latency (go_by_rendezvous).
void apply_eager_limit(WorkloadCosts& w, double limit);

// What a cost-aware family plans for: the bounding stage's F, I, W and the slowest hand-over, in
// units of that F (planning compares sums, so the scale is free and the numbers stay near 1).
PlanningCosts planning_costs(const WorkloadCosts& w);

// The record's workload fields: workload, partition, device_profile, time_unit, stage_costs,
// bounding_stage, busiest_rank, activation_memory.
void add_workload_report(nlohmann::json& record, const WorkloadCosts& w, const Schedule& s,
                         const Metrics& m);
// Their text: after the header, the stage table; after the rank table, the memory table.
void print_workload_costs(const nlohmann::json& record);
void print_workload_memory(const nlohmann::json& record);

}  // namespace ppbench::cli
