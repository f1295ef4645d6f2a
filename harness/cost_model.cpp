#include "harness/cost_model.h"

#include <charconv>
#include <cmath>

#include "schedules/error.h"

namespace ppbench {

namespace {

[[noreturn]] void bad_cost(std::string_view entry, std::string_view why) {
  throw UsageError("bad --cost entry '" + std::string(entry) + "': " + std::string(why) +
                   " (expected e.g. F=1,B=2,I=1,W=1,FB=3 with non-negative numbers)");
}

}  // namespace

CostSpec parse_cost_spec(std::string_view text) {
  CostSpec spec;
  if (text.empty()) return spec;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view entry = text.substr(pos, comma - pos);
    pos = comma + 1;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) bad_cost(entry, "missing '='");
    std::string key(entry.substr(0, eq));
    std::string_view number = entry.substr(eq + 1);
    double value = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || ec != std::errc() || end != number.data() + number.size() ||
        !std::isfinite(value))
      bad_cost(entry, "'" + std::string(number) + "' is not a number");
    if (value < 0) bad_cost(entry, "costs must be non-negative");
    if (key == "F") spec.f = value;
    else if (key == "B") spec.b = value, spec.has_b = true;
    else if (key == "I") spec.i = value, spec.has_i = true;
    else if (key == "W") spec.w = value, spec.has_w = true;
    else if (key == "FB") spec.fb = value, spec.has_fb = true;
    else bad_cost(entry, "unknown key '" + key + "', allowed: F, B, I, W, FB");
  }
  return spec;
}

StageCost resolve(const CostSpec& spec, double comm) {
  StageCost c;
  c.f = spec.f;
  c.i = spec.i;
  c.w = spec.w;
  if (spec.has_b) {
    c.b = spec.b;
    if (!spec.has_i && !spec.has_w) {
      c.i = c.w = spec.b / 2;
    } else if (spec.has_i && !spec.has_w) {
      c.w = spec.b - spec.i;
    } else if (!spec.has_i && spec.has_w) {
      c.i = spec.b - spec.w;
    }
    if (c.i < 0 || c.w < 0)
      throw UsageError("bad --cost: B=" + std::to_string(spec.b) +
                       " is smaller than the I or W given with it (B = I + W)");
  } else {
    c.b = c.i + c.w;
  }
  c.fb = spec.has_fb ? spec.fb : c.f + c.b;
  c.comm = comm;
  return c;
}

}  // namespace ppbench
