#include "harness/cost_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"

namespace ppbench {

namespace {

// The shortest text that reads back as v: a refused FB of 1.9999999999999 must not print as the
// limit 2 it is below.
std::string num(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

[[noreturn]] void bad_cost(std::string_view entry, std::string_view why) {
  throw UsageError("bad --cost entry " + quoted(entry) + ": " + std::string(why) +
                   " (expected e.g. F=1,B=2,I=1,W=1,FB=3, each a number >= " + num(kMinCost) +
                   " and <= " + num(kMaxCost) + ", each key once)");
}

}  // namespace

CostSpec parse_cost_spec(std::string_view text) {
  CostSpec spec;
  if (text.empty()) return spec;
  bool has_f = false;
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
    if (!number.empty() && number.front() == '+') number.remove_prefix(1);
    double value = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || end != number.data() + number.size() ||
        (ec != std::errc() && ec != std::errc::result_out_of_range))
      bad_cost(entry, quoted(entry.substr(eq + 1)) + " is not a number");
    if (ec == std::errc::result_out_of_range || !std::isfinite(value) || value > kMaxCost)
      bad_cost(entry, "costs must be finite and at most " + num(kMaxCost));
    if (!(value >= kMinCost)) bad_cost(entry, "costs must be at least " + num(kMinCost));
    bool* seen = nullptr;
    if (key == "F")
      seen = &has_f, spec.f = value;
    else if (key == "B")
      seen = &spec.has_b, spec.b = value;
    else if (key == "I")
      seen = &spec.has_i, spec.i = value;
    else if (key == "W")
      seen = &spec.has_w, spec.w = value;
    else if (key == "FB")
      seen = &spec.has_fb, spec.fb = value;
    else
      bad_cost(entry, "unknown key " + quoted(key) + ", allowed: F, B, I, W, FB");
    if (*seen) bad_cost(entry, "key " + key + " is given twice");
    *seen = true;
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
    if (spec.has_i && spec.has_w &&
        std::fabs(spec.b - (spec.i + spec.w)) > 1e-9 * std::max(spec.b, spec.i + spec.w))
      throw UsageError("bad --cost: B=" + num(spec.b) + " is not I + W = " + num(spec.i) + " + " +
                       num(spec.w) + " (give B = I + W, or leave one of the three out)");
    if (!(c.i > 0) || !(c.w > 0))
      throw UsageError("bad --cost: B=" + num(spec.b) +
                       " is not larger than the I or W given with it (B = I + W, each > 0)");
  } else {
    c.b = c.i + c.w;
  }
  // A derived I or W (B less the other) is held to the floor a given cost is.
  for (const auto& [name, value] : {std::pair{"I", c.i}, std::pair{"W", c.w}})
    if (value < kMinCost)
      throw UsageError(std::string("bad --cost: ") + name + " = " + num(value) +
                       " as derived from the costs given is below " + num(kMinCost) +
                       " (each cost from " + num(kMinCost) + " to " + num(kMaxCost) + ")");
  c.fb = spec.has_fb ? spec.fb : c.f + c.b;
  if (c.fb < std::max(c.f, c.b))
    throw UsageError("bad --cost: FB=" + num(c.fb) +
                     " is below max(F, B) = " + num(std::max(c.f, c.b)) +
                     " (an overlapped pair takes at least as long as its longer half; FB = F + "
                     "B means nothing is saved)");
  c.comm = comm;
  return c;
}

}  // namespace ppbench
