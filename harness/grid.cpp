#include "harness/grid.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace ppbench {

namespace {

std::string cell_label(const Task& t, bool with_stage) {
  return with_stage ? to_string(t) : std::string(1, op_letter(t.op)) + std::to_string(t.mb);
}

std::string label(const Action& a, bool with_stage) {
  if (!a.paired()) return cell_label(a.task, with_stage);
  return cell_label(a.task, with_stage) + "+" + cell_label(a.partner, with_stage);
}

long whole_unit(double t) {
  const double r = std::round(t);
  if (std::abs(r - t) > 1e-9)
    throw UsageError("--format grid needs whole-unit costs (got an event at time " +
                     std::to_string(t) + "); use integer --cost values and --comm");
  return static_cast<long>(r);
}

}  // namespace

std::string render_grid(const Trace& trace, const Placement& placement) {
  const bool with_stage = placement.stages() > placement.ranks;
  long end = 0;
  std::size_t width = 1;
  for (const auto& e : trace.compute) {
    end = std::max(end, whole_unit(e.end));
    width = std::max(width, label(e.action, with_stage).size());
  }
  std::vector<std::vector<std::string>> rows(trace.ranks, std::vector<std::string>(end, "."));
  for (const auto& e : trace.compute) {
    // A cost below the rounding tolerance would leave its action without a cell, unseen.
    if (e.end > e.start && whole_unit(e.end) == whole_unit(e.start))
      throw UsageError("--format grid needs whole-unit costs (" + label(e.action, with_stage) +
                       " lasts " + std::to_string(e.end - e.start) +
                       ", which has no cell); use integer --cost values and --comm");
    for (long t = whole_unit(e.start); t < whole_unit(e.end); ++t)
      rows[e.rank][t] = label(e.action, with_stage);
  }

  std::string out = "time    ";
  for (long t = 0; t < end; ++t) {
    std::string n = std::to_string(t);
    out += n + std::string(width + 1 - std::min(n.size(), width), ' ');
  }
  out += '\n';
  for (int r = 0; r < trace.ranks; ++r) {
    std::string head = "rank " + std::to_string(r) + ":";
    out += head + std::string(8 - std::min<std::size_t>(head.size(), 7), ' ');
    for (const auto& cell : rows[r]) out += cell + std::string(width + 1 - cell.size(), ' ');
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  }
  return out;
}

}  // namespace ppbench
