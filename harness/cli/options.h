// Flags shared by the subcommands that build a schedule or a cost model, so
// every command spells and checks them the same way, and the validators every
// numeric or enumerated flag goes through.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/cost_model.h"
#include "harness/memory_estimate.h"
#include "schedules/schedule.h"

namespace ppbench::cli {

// Validators. Each parses the value itself (CLI11 alone would read 010 as octal, wrap -1 into an
// unsigned seed, saturate 99999999999999999999, and let nan through a range) and rewrites it into
// a form CLI11 converts to exactly that value. Their messages name the value (quoted: control
// characters escaped) and what is allowed, with bounds printed readably (%g).
//
// A decimal integer from `lo` to `hi`.
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);
// Any decimal integer that fits in 64 bits (shape flags; the workload builders say which are
// allowed).
CLI::Validator int64_value();
// A decimal integer from 0 to 2^64 - 1 (seeds).
CLI::Validator unsigned64();
// A finite number x with lo <= x <= hi, or lo < x <= hi when `lo_open`.
CLI::Validator number_in(double lo, double hi, bool lo_open = false);
// One of `names`.
CLI::Validator one_of(std::initializer_list<const char*> names);

// The readable form of a number in messages: 1e+06, 0.5, 4096.
std::string number_text(double v);

struct ScheduleFlags {
  std::string schedule;
  int devices = 0;
  int microbatches = 0;
  int chunks = 0;
  int group_size = 0;
  double memory_limit = 0;  // 0: the family's default
  double w_memory = 1;      // M_W / M_B

  void add_to(CLI::App& app);
  // Planned for the default costs (F = I = W = 1, comm 0): the commands without --cost.
  ScheduleParams params() const {
    return {schedule, devices, microbatches, chunks, group_size, {}, memory_limit, w_memory};
  }
  // Planned for the costs of --cost and --comm.
  ScheduleParams params(const StageCost& planned) const {
    return {schedule,     devices,    microbatches,
            chunks,       group_size, {planned.f, planned.i, planned.w, planned.comm},
            memory_limit, w_memory};
  }
  // "--devices 4 --microbatches 8" (and --chunks, --group-size, --memory-limit, --w-memory when
  // given), for messages.
  std::string describe() const;
};

struct CostFlags {
  std::string cost;  // "F=1,B=2,I=1,W=1,FB=3"
  double comm = 0;
  CLI::Option* cost_option = nullptr;

  void add_to(CLI::App& app);
  StageCost resolve() const;
};

// --max-memory BYTES: the bar every estimate is checked against (default: the available memory).
struct MemoryFlag {
  std::string max_memory;
  CLI::Option* option = nullptr;

  void add_to(CLI::App& app);
  // The bar: --max-memory when given (an empty or malformed value is a UsageError), the memory
  // available now otherwise.
  MemoryBudget budget() const;
};

}  // namespace ppbench::cli
