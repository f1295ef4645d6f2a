#include "schedules/action.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"

namespace ppbench {

char op_letter(Op op) {
  switch (op) {
    case Op::F:
      return 'F';
    case Op::B:
      return 'B';
    case Op::I:
      return 'I';
    case Op::W:
      return 'W';
  }
  return '?';
}

std::string to_string(const Task& t) {
  std::string s(1, op_letter(t.op));
  s += std::to_string(t.stage);
  s += '.';
  s += std::to_string(t.mb);
  return s;
}

std::string to_string(const Action& a) {
  if (!a.paired()) return to_string(a.task);
  return "(" + to_string(a.task) + "+" + to_string(a.partner) + ")";
}

namespace {

[[noreturn]] void bad(std::string_view text, std::string_view why) {
  // quoted: the token is the user's, and may hold a NUL (which would end the message) or be
  // megabytes long.
  throw UsageError("bad action " + quoted(text) + ": " + std::string(why) +
                   " (expected e.g. F3.1, B0.2, I1.0, W1.0 or (F0.7+B15.3))");
}

int parse_int(std::string_view whole, std::string_view digits) {
  int value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value < 0)
    bad(whole, "stage and micro-batch must be non-negative integers");
  return value;
}

Task parse_task(std::string_view whole, std::string_view text, int max_stage) {
  if (text.size() < 4) bad(whole, "too short");
  Op op = Op::F;
  switch (text[0]) {
    case 'F':
      op = Op::F;
      break;
    case 'B':
      op = Op::B;
      break;
    case 'I':
      op = Op::I;
      break;
    case 'W':
      op = Op::W;
      break;
    default:
      bad(whole, "op must be one of F, B, I, W");
  }
  auto dot = text.find('.');
  if (dot == std::string_view::npos) bad(whole, "missing '.' between stage and micro-batch");
  const int stage = parse_int(whole, text.substr(1, dot - 1));
  if (stage > max_stage)
    bad(whole, "stage " + std::to_string(stage) + " is out of range (allowed: 0.." +
                   std::to_string(max_stage) + ")");
  return Task(op, stage, parse_int(whole, text.substr(dot + 1)));
}

}  // namespace

Action parse_action(std::string_view text, int max_stage) {
  if (text.empty()) bad(text, "empty");
  max_stage = std::min(max_stage, kMaxStageId);
  if (text.front() != '(') return Action::single(parse_task(text, text, max_stage));
  if (text.back() != ')') bad(text, "an overlapped pair must end with ')'");
  auto inner = text.substr(1, text.size() - 2);
  auto plus = inner.find('+');
  if (plus == std::string_view::npos) bad(text, "an overlapped pair needs '+'");
  Task f = parse_task(text, inner.substr(0, plus), max_stage);
  Task b = parse_task(text, inner.substr(plus + 1), max_stage);
  if (f.op != Op::F) bad(text, "the first half of a pair must be a forward");
  if (b.op != Op::B && b.op != Op::I) bad(text, "the second half of a pair must be B or I");
  return Action::pair(f, b);
}

}  // namespace ppbench
