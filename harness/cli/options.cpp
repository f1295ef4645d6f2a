#include "harness/cli/options.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/error.h"

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
  app.add_option("-s,--schedule", schedule, "Schedule family (see `ppbench list`)")->required();
  app.add_option("-d,--devices", devices, "Pipeline ranks D")
      ->required()
      ->check(integer_in(1, 4096));
  app.add_option("-n,--microbatches", microbatches,
                 "Micro-batches per training step N (all chains)")
      ->required()
      ->check(integer_in(1, 1 << 20));
  app.add_option("-v,--chunks", chunks,
                 "Model chunks per rank v (interleaved-1f1b only; default 2)")
      ->check(integer_in(1, 1024));
  app.add_option("--group-size", group_size,
                 "Megatron's micro-batch group size per virtual stage (interleaved-1f1b only; "
                 "default D, allowed D..N)")
      ->check(integer_in(1, 1 << 20));
  app.add_option("--memory-limit", memory_limit,
                 "Activations a rank may hold, in units of M_B (one micro-batch on one stage), for "
                 "the families that plan for it (zb-1p: default D, zb-2p: default 2D)")
      ->check(number_in(0, kMaxCost, true));
  app.add_option("--w-memory", w_memory,
                 "The share of M_B that only W still needs once I has run (M_W / M_B, the Zero "
                 "Bubble paper's 32h / (34h + 5as)), for zb-1p and zb-2p (default 1: W frees all)")
      ->check(number_in(0, 1));
}

std::string ScheduleFlags::describe() const {
  std::string s =
      "--devices " + std::to_string(devices) + " --microbatches " + std::to_string(microbatches);
  if (chunks > 0) s += " --chunks " + std::to_string(chunks);
  if (group_size > 0) s += " --group-size " + std::to_string(group_size);
  if (memory_limit > 0) s += " --memory-limit " + number_text(memory_limit);
  if (w_memory != 1) s += " --w-memory " + number_text(w_memory);
  return s;
}

void CostFlags::add_to(CLI::App& app) {
  cost_option = app.add_option(
      "--cost", cost,
      "Per-stage action costs, e.g. F=1,B=2,I=1,W=1,FB=3, each finite, > 0 and <= 1e12. Given only "
      "B: I = W = B/2; given I and W: B = I + W (all three: B must equal I + W); FB defaults to "
      "F + B. Defaults F=1, I=1, W=1");
  app.add_option("--comm", comm,
                 "Time between an action on one rank and a dependent action on another rank "
                 "(default 0, at most 1e12)")
      ->check(number_in(0, kMaxCost));
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

void MemoryFlag::add_to(CLI::App& app) {
  option =
      app.add_option("--max-memory", max_memory,
                     "Refuse sizes whose estimated memory exceeds BYTES (e.g. 512M, 64G, 1.5T; "
                     "K, M, G, T are powers of 1024). Default: the memory available now "
                     "(MemAvailable in /proc/meminfo)");
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
