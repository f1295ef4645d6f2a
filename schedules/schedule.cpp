#include "schedules/schedule.h"

namespace ppbench {

std::size_t Schedule::action_count() const {
  std::size_t n = 0;
  for (const auto& r : ranks) n += r.size();
  return n;
}

bool Schedule::splits_backward() const {
  for (const auto& r : ranks)
    for (const auto& a : r)
      if (a.task.op == Op::I || a.task.op == Op::W || (a.paired() && a.partner.op == Op::I))
        return true;
  return false;
}

std::string to_text(const Schedule& s) {
  std::string out;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const auto& a : s.ranks[r]) {
      out += ' ';
      out += to_string(a);
    }
    out += '\n';
  }
  return out;
}

}  // namespace ppbench
