#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "schedules/action.h"
#include "schedules/registry.h"
#include "schedules/schedule_file.h"

namespace ppbench {
namespace {

TEST(TextForm, ActionRoundTrips) {
  for (const char* text : {"F3.1", "B0.0", "I12.7", "W1.2", "(F0.7+B15.3)", "(F2.0+I5.1)"})
    EXPECT_EQ(to_string(parse_action(text)), text);
}

TEST(TextForm, RejectsMalformedActions) {
  for (const char* text : {"", "X1.2", "F1", "F.1", "F1.", "F-1.2", "F1.2x", "(F0.1+F1.2)",
                           "(B0.1+F1.2)", "(F0.1+B1.2", "(F0.1B1.2)"})
    EXPECT_THROW(parse_action(text), UsageError) << text;
}

TEST(Action, TasksListsASingleTaskOrThePairsForwardThenBackward) {
  std::vector<Task> seen;
  const Action single = parse_action("I2.5"), pair = parse_action("(F0.7+B15.3)");
  for (const Task& t : single.tasks()) seen.push_back(t);
  EXPECT_EQ(seen, (std::vector<Task>{{Op::I, 2, 5}}));
  seen.clear();
  for (const Task& t : pair.tasks()) seen.push_back(t);
  EXPECT_EQ(seen, (std::vector<Task>{{Op::F, 0, 7}, {Op::B, 15, 3}}));
}

TEST(TextForm, ScheduleRoundTrips) {
  for (const auto& info : all_schedules()) {
    ScheduleParams p{std::string(info.name), 4, 8, 0, 0};
    Schedule s;
    try {
      s = generate(p);
    } catch (const UsageError&) {
      continue;  // a family not written yet
    }
    EXPECT_EQ(parse_text_rank_lines(to_text(s), info.name).ranks, s.ranks) << info.name;
  }
}

}  // namespace
}  // namespace ppbench
