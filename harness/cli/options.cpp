#include "harness/cli/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "schedules/lower.h"
#include "schedules/registry.h"

namespace ppbench::cli {

namespace {

// Digits with an optional sign in front (a leading '+' is dropped for from_chars).
std::string_view without_plus(std::string_view s) {
  return s.size() > 1 && s.front() == '+' && s[1] != '-' ? s.substr(1) : s;
}

template <typename T>
bool parse_integer(std::string_view text, T& out, bool& too_large) {
  text = without_plus(text);
  too_large = false;
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 10);
  if (ec == std::errc::result_out_of_range && end == text.data() + text.size()) {
    too_large = true;
    return false;
  }
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string replicas_help() {
  return "1 to " + std::to_string(kMaxReplicas) + "; default " + std::to_string(kDefaultReplicas);
}

void require_replicas_to_overlap(int replicas, bool overlap) {
  if (overlap && replicas < 2)
    throw UsageError("--dp-overlap with --dp " + std::to_string(replicas) +
                     ": one replica has no all-reduce to overlap (allowed: --dp-overlap with "
                     "--dp R, R >= 2)");
}

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
  const std::string allowed = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, allowed](std::string& value) -> std::string {
        std::int64_t v = 0;
        bool too_large = false;
        if (!parse_integer(value, v, too_large))
          return quoted(value) + (too_large ? " is out of range" : " is not an integer") +
                 " (allowed: " + allowed + ")";
        if (v < lo || v > hi) return value + " is out of range (allowed: " + allowed + ")";
        value = std::to_string(v);
        return "";
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", "integer_in");
}

CLI::Validator int64_value() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::int64_t v = 0;
        bool too_large = false;
        if (!parse_integer(value, v, too_large))
          return quoted(value) +
                 (too_large
                      ? " is too large (allowed: a positive integer up to 9223372036854775807)"
                      : " is not an integer");
        value = std::to_string(v);
        return "";
      },
      "INT", "int64");
}

CLI::Validator unsigned64() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::uint64_t v = 0;
        bool too_large = false;
        if (!parse_integer(value, v, too_large))
          return quoted(value) + (too_large ? " is out of range" : " is not allowed") +
                 " (allowed: a non-negative decimal integer from 0 to 18446744073709551615 = "
                 "2^64-1)";
        value = std::to_string(v);
        return "";
      },
      "UINT64", "unsigned64");
}

CLI::Validator number_in(double lo, double hi, bool lo_open) {
  const std::string allowed = "a number " + std::string(lo_open ? "> " : ">= ") + number_text(lo) +
                              " and <= " + number_text(hi);
  return CLI::Validator(
      [lo, hi, lo_open, allowed](std::string& value) -> std::string {
        const std::string_view text = without_plus(value);
        double v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || end != text.data() + text.size() ||
            (ec != std::errc() && ec != std::errc::result_out_of_range))
          return quoted(value) + " is not a number (allowed: " + allowed + ")";
        if (ec == std::errc::result_out_of_range || !std::isfinite(v) || v > hi || v < lo ||
            (lo_open && v == lo))
          return quoted(value) + " is out of range (allowed: " + allowed + ")";
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        value = buf;
        return "";
      },
      "NUMBER in " + std::string(lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) +
          "]",
      "number_in");
}

CLI::Validator one_of(std::initializer_list<const char*> names) {
  std::vector<std::string> all(names.begin(), names.end());
  std::string list;
  for (const auto& n : all) list += (list.empty() ? "" : ", ") + n;
  return CLI::Validator(
      [all, list](std::string& value) -> std::string {
        for (const auto& n : all)
          if (value == n) return "";
        return quoted(value) + " is not allowed (allowed: " + list + ")";
      },
      "{" + list + "}", "one_of");
}

void ScheduleFlags::add_to(CLI::App& app) {
  schedule_option = app.add_option("-s,--schedule", schedule,
                                   "Schedule family (see `ppbench list`); or --schedule-file");
  file_option = app.add_option(
      "--schedule-file", schedule_file,
      "Your own schedule from FILE instead of --schedule: ppbench's text form (rank 0: F0.0 ...; "
      "a '# placement: ...' header for other layouts than one stage per rank) or PyTorch's "
      "pipeline CSV (0F0,0B0; .csv or rows not starting with 'rank'); D and N come from the file "
      "(docs/schedules.md, \"Your own schedule\")");
  devices_option = app.add_option("-d,--devices,--pp", devices,
                                  "Pipeline ranks D (with --schedule; --pp is the same)")
                       ->transform(integer_in(1, 4096));
  microbatches_option =
      app.add_option("-n,--microbatches", microbatches,
                     "Micro-batches per training step N (all chains; with --schedule)")
          ->transform(integer_in(1, 1 << 20));
  chunks_option =
      app.add_option(
             "-v,--chunks", chunks,
             "Model chunks per rank v (interleaved-1f1b, looped-bfs, interleaved-zb; default 2)")
          ->transform(integer_in(1, 1024));
  group_size_option =
      app.add_option("--group-size", group_size,
                     "Megatron's micro-batch group size per virtual stage (interleaved-1f1b only; "
                     "default D, or N when N < D; allowed 1..N where the order cannot deadlock; "
                     "N/max(1, N div D) gives PyTorch's order)")
          ->transform(integer_in(1, 1 << 20));
  memory_limit_option =
      app.add_option(
             "--memory-limit", memory_limit,
             "Activations a rank may hold, in units of M_B (one micro-batch on one stage), for "
             "the families that plan for it (zb-1p: default D, zb-2p: default 2D)")
          ->transform(number_in(0, kMaxCost, true));
  w_memory_option =
      app.add_option(
             "--w-memory", w_memory,
             "The share of M_B that only W still needs once I has run (M_W / M_B, the Zero "
             "Bubble paper's 32h / (34h + 5as)), for zb-1p and zb-2p (default 1: W frees all)")
          ->transform(number_in(0, 1));
}

ScheduleParams ScheduleFlags::resolve(const MemoryBudget& budget) {
  const bool named = schedule_option->count() > 0, from_file = file_option->count() > 0;
  if (named && from_file)
    throw UsageError(
        "--schedule and --schedule-file exclude each other: give a family or a file, not both");
  if (!named && !from_file)
    throw UsageError("--schedule is required (a family, see `ppbench list`), or --schedule-file");
  if (named) {
    if (devices_option->count() == 0) throw UsageError("--devices is required with --schedule");
    if (microbatches_option->count() == 0)
      throw UsageError("--microbatches is required with --schedule");
    return params();
  }
  // The file fixes the layout: the generator's flags have nothing to say about it.
  if (chunks_option->count() > 0 || group_size_option->count() > 0)
    throw UsageError(
        "--chunks and --group-size are for --schedule families with chunks, not --schedule-file (a "
        "file's '# placement: interleaved v=N' header gives its chunks)");
  if (memory_limit_option->count() > 0 || w_memory_option->count() > 0)
    throw UsageError(
        "--memory-limit and --w-memory are for --schedule zb-1p and zb-2p, not --schedule-file "
        "(a file's order is already planned)");
  file = std::make_shared<const ScheduleFile>(read_schedule_file(schedule_file, budget.bytes));
  const ScheduleParams& p = file->schedule.params;
  if (devices_option->count() > 0 && devices != p.devices)
    throw UsageError("--devices " + std::to_string(devices) + " disagrees with --schedule-file " +
                     quoted(schedule_file) + ", which lists " + std::to_string(p.devices) +
                     " ranks (leave --devices out: D comes from the file)");
  if (microbatches_option->count() > 0 && microbatches != p.microbatches)
    throw UsageError("--microbatches " + std::to_string(microbatches) +
                     " disagrees with --schedule-file " + quoted(schedule_file) +
                     ", which carries " + std::to_string(p.microbatches) +
                     " micro-batches (leave --microbatches out: N comes from the file)");
  return p;
}

Schedule ScheduleFlags::build(const ValidateOptions& options) const {
  if (file) {
    validate_file(*file, options);
    return file->schedule;
  }
  Schedule s = generate(params());
  validate(s, options);
  return s;
}

int ScheduleFlags::stages_per_chain() const {
  return file ? file->schedule.placement.stages_per_chain() : layout_stages_per_chain(params());
}

std::string ScheduleFlags::describe() const {
  if (file) return "--schedule-file " + quoted(schedule_file);
  std::string s = "--schedule " + schedule + " --devices " + std::to_string(devices) +
                  " --microbatches " + std::to_string(microbatches);
  if (chunks > 0) s += " --chunks " + std::to_string(chunks);
  if (group_size > 0) s += " --group-size " + std::to_string(group_size);
  if (memory_limit > 0) s += " --memory-limit " + number_text(memory_limit);
  if (w_memory != 1) s += " --w-memory " + number_text(w_memory);
  return s;
}

void CostFlags::add_to(CLI::App& app) {
  cost_option = app.add_option(
      "--cost", cost,
      "Per-stage action costs, e.g. F=1,B=2,I=1,W=1,FB=3, each from 1e-12 to 1e12. Given only "
      "B: I = W = B/2; given I and W: B = I + W (all three: B must equal I + W); FB defaults to "
      "F + B and may not be below max(F, B). Defaults F=1, I=1, W=1");
  app.add_option("--comm", comm,
                 "Time between an action on one rank and a dependent action on another rank "
                 "(default 0, at most 1e12)")
      ->transform(number_in(0, kMaxCost));
}

StageCost CostFlags::resolve() const {
  if (!std::isfinite(comm) || comm < 0 || comm > kMaxCost)
    throw UsageError("--comm " + number_text(comm) +
                     " is out of range (allowed: a number >= 0 and <= " + number_text(kMaxCost) +
                     ")");
  if (cost_option && cost_option->count() > 0 && cost.empty())
    throw UsageError("--cost '' is empty (expected e.g. F=1,B=2,I=1,W=1,FB=3)");
  return ppbench::resolve(parse_cost_spec(cost), comm);
}

void ChannelCapacityFlag::add_to(CLI::App& app, const std::string& also) {
  app.add_option("--channel-capacity", given,
                 "Messages one rank-to-rank mailbox holds (default " +
                     std::to_string(kDefaultChannelCapacity) +
                     ", or as many as the schedule needs where that is more" + also + ")")
      ->transform(integer_in(1, 1 << 20));
}

int ChannelCapacityFlag::resolve(const ScheduleFlags& schedule) const {
  if (given) return *given;
  return default_channel_capacity(schedule.build());
}

void MemoryFlag::add_to(CLI::App& app) {
  option =
      app.add_option("--max-memory", max_memory,
                     "Refuse sizes whose estimated memory exceeds BYTES (e.g. 512M, 64G, 1.5T; "
                     "K, M, G, T, P are powers of 1024). Default: the memory available now, the "
                     "least of MemAvailable in /proc/meminfo, the cgroup's limit less its usage "
                     "and the room ulimit -v leaves");
}

MemoryBudget MemoryFlag::budget() const {
  if (option != nullptr && option->count() > 0) {
    MemoryBudget b;
    b.bytes = parse_byte_size(max_memory, "--max-memory");
    b.source = "allowed by --max-memory " + max_memory;
    return b;
  }
  return available_memory();
}

}  // namespace ppbench::cli
