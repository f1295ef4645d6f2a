// Flags shared by the subcommands that build a schedule or a cost model, so
// every command spells and checks them the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "harness/cost_model.h"
#include "schedules/schedule.h"

namespace ppbench::cli {

struct ScheduleFlags {
  std::string schedule;
  int devices = 0;
  int microbatches = 0;
  int chunks = 0;
  int group_size = 0;

  void add_to(CLI::App& app);
  ScheduleParams params() const { return {schedule, devices, microbatches, chunks, group_size}; }
};

struct CostFlags {
  std::string cost;  // "F=1,B=2,I=1,W=1,FB=3"
  double comm = 0;

  void add_to(CLI::App& app);
  StageCost resolve() const;
};

}  // namespace ppbench::cli
