// Flags shared by the subcommands that build a schedule or a cost model, so
// every command spells and checks them the same way, and the validators every
// numeric or enumerated flag goes through.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/cost_model.h"
#include "harness/memory_estimate.h"
#include "schedules/schedule.h"
#include "schedules/schedule_file.h"
#include "schedules/validate.h"

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

// --dp R of simulate and run: the data-parallel replicas both accept, and their --dp-overlap.
inline constexpr int kDefaultReplicas = 1;
inline constexpr int kMaxReplicas = 65536;
// "1 to 65536; default 1", for both commands' help.
std::string replicas_help();
// --dp-overlap overlaps the replicas' all-reduces with the backward; one replica has none, so
// --dp-overlap with R = 1 (given, or the default) is a UsageError naming both flags.
void require_replicas_to_overlap(int replicas, bool overlap);

// --schedule with --devices and --microbatches (and --chunks, --group-size), or --schedule-file:
// a schedule generated from its family, or read from a file (schedules/schedule_file.h).
struct ScheduleFlags {
  std::string schedule;
  std::string schedule_file;
  int devices = 0;
  int microbatches = 0;
  int chunks = 0;
  int group_size = 0;
  CLI::Option* schedule_option = nullptr;
  CLI::Option* file_option = nullptr;
  CLI::Option* devices_option = nullptr;
  CLI::Option* microbatches_option = nullptr;
  CLI::Option* chunks_option = nullptr;
  CLI::Option* group_size_option = nullptr;
  CLI::Option* memory_limit_option = nullptr;
  CLI::Option* w_memory_option = nullptr;
  double memory_limit = 0;  // 0: the family's default
  double w_memory = 1;      // M_W / M_B
  // The file once resolve() read it.
  std::shared_ptr<const ScheduleFile> file;

  void add_to(CLI::App& app);
  // Checks which flags were given (one of --schedule and --schedule-file; --devices and
  // --microbatches with --schedule, and agreeing with the file when given with it), reads the
  // file (its size checked against `budget`), and returns the schedule's parameters.
  ScheduleParams resolve(const MemoryBudget& budget);
  // The schedule, proven sound: generated from the flags, or the file's (resolve() first).
  Schedule build(const ValidateOptions& options = {}) const;
  // The stages of one chain (the partition's stage count) before the schedule is built
  // (resolve() first): the file's, or what the family's layout (schedules/registry.h) gives at
  // D and v. 0 for an unknown family, which build() names.
  int stages_per_chain() const;
  // What a cost-aware family plans for: the default costs (F = I = W = 1, comm 0), or those of
  // --cost and --comm where a command takes them (plan_for, before resolve).
  PlanningCosts planning{};
  void plan_for(const StageCost& c) { planning = {c.f, c.i, c.w, c.comm}; }
  // The generator's parameters from the flags alone.
  ScheduleParams params() const {
    return {schedule, devices, microbatches, chunks, group_size, planning, memory_limit, w_memory};
  }
  // "--devices 4 --microbatches 8" (and --chunks, --group-size when given), or
  // "--schedule-file FILE", for messages.
  std::string describe() const;
};

struct CostFlags {
  std::string cost;  // "F=1,B=2,I=1,W=1,FB=3"
  double comm = 0;
  CLI::Option* cost_option = nullptr;

  void add_to(CLI::App& app);
  StageCost resolve() const;
};

// --channel-capacity of run and memory: the messages one rank-to-rank mailbox of the CPU
// transports holds. Without the flag: 4, or the least the schedule's lowered program needs where
// that is more (breadth-first orders send a whole chunk before the peer takes the first message,
// and a transport that could not hold them would refuse a schedule ppbench generated).
struct ChannelCapacityFlag {
  std::optional<int> given;

  void add_to(CLI::App& app, const std::string& also = "");
  // The capacity to run `schedule` with (resolve() first): the flag's value, or the default,
  // for which the schedule is built and proven with unbounded channels.
  int resolve(const ScheduleFlags& schedule) const;
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
