#include "schedules/schedule.h"

#include <sstream>

#include "core/error.h"

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

std::vector<std::vector<Action>> parse_rank_lines(std::string_view text) {
  std::vector<std::vector<Action>> ranks;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream words(line);
    std::string head, label;
    words >> head >> label;
    std::string expected = std::to_string(ranks.size()) + ":";
    if (head != "rank" || label != expected)
      throw UsageError("bad schedule line '" + line + "': expected 'rank " + expected + " ...'");
    std::vector<Action> actions;
    std::string token;
    while (words >> token) actions.push_back(parse_action(token));
    ranks.push_back(std::move(actions));
  }
  return ranks;
}

}  // namespace ppbench
