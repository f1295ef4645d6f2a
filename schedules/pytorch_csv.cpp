// PyTorch's pipeline CSV, as torch.distributed.pipelining writes and reads it
// (torch/distributed/pipelining/schedules.py: _PipelineScheduleRuntime._dump_csv / _load_csv,
// _Action.__repr__ / _Action.from_str and _action_regex): csv.writer rows, one per rank, each
// cell an action `<stage><type><micro-batch>` (`0F1`, `1I0`, `2W3`, `0B0`), an empty cell for an
// idle step, `(0F1;3B0)OVERLAP_F_B` for an overlapped forward and backward (forward first, as
// ScheduleDualPipeV writes it), and, in the "compute_comms" form, communication actions
// (`1SEND_F0`, `2RECV_B3`, `0UNSHARD`, `0WAIT_SEND_F1`, ...).
//
// PyTorch matches a cell with re.match (a prefix); here the whole cell must be one action, so that
// a typo is not read as something else.
#include <array>
#include <charconv>
#include <cstdint>

#include "core/error.h"
#include "schedules/schedule_file.h"

namespace ppbench {

namespace {

// PyTorch's computation types, longest first where one is a prefix of another (_action_regex).
constexpr std::array<std::string_view, 14> kTypes = {
    "WAIT_REDUCE_GRAD", "WAIT_SEND_F", "WAIT_SEND_B", "REDUCE_GRAD", "UNSHARD", "RESHARD", "SEND_F",
    "RECV_F",           "SEND_B",      "RECV_B",      "F",           "I",       "B",       "W"};

const char* const kExpected =
    "expected e.g. 0F1, 1I0, 2W3, 0B0, (0F1;3B0)OVERLAP_F_B, or a communication action such as "
    "1SEND_F0, which is skipped";

struct Cell {
  std::string_view text;  // for messages
  int rank = 0;
  int line = 0;
  std::string_view name;
};

[[noreturn]] void bad_cell(const Cell& c, const std::string& why) {
  file_error(c.name, c.line,
             "rank " + std::to_string(c.rank) + ": bad action " + quoted(c.text) + ": " + why +
                 " (" + kExpected + ")");
}

// Digits as a number below `limit`; anything else is refused naming `what`.
std::int64_t number(const Cell& c, std::string_view digits, std::int64_t limit, const char* what) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && v >= limit))
    bad_cell(c, std::string(what) + " " + std::string(digits) + " is out of range (allowed: 0.." +
                    std::to_string(limit - 1) + ")");
  if (ec != std::errc() || end != digits.data() + digits.size())
    bad_cell(c, std::string(what) + " must be a non-negative integer");
  return v;
}

// One `<stage><type><micro-batch>`. Returns false for a communication action.
bool parse_single(const Cell& c, std::string_view s, Task& out) {
  std::size_t k = 0;
  while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
  if (k == 0) bad_cell(c, "no stage number in front");
  const std::string_view stage = s.substr(0, k), rest = s.substr(k);
  for (std::string_view type : kTypes) {
    if (rest.substr(0, type.size()) != type) continue;
    const std::string_view mb = rest.substr(type.size());
    if (!mb.empty() && (mb.front() < '0' || mb.front() > '9'))
      continue;             // "0FX" is no F; try the other types, then refuse it
    if (type.size() > 1) {  // communication: ppbench derives its own
      if (!mb.empty()) number(c, mb, std::int64_t{1} << 40, "micro-batch");
      return false;
    }
    if (mb.empty()) bad_cell(c, "a compute action needs its micro-batch number");
    const Op op = type == "F" ? Op::F : type == "I" ? Op::I : type == "B" ? Op::B : Op::W;
    out = Task(op, static_cast<int>(number(c, stage, kMaxFileStages, "stage")),
               static_cast<int>(number(c, mb, kMaxFileMicrobatches, "micro-batch")));
    return true;
  }
  bad_cell(c, "unknown action type");
}

// Returns false for a communication action (skipped).
bool parse_cell(const Cell& c, std::string_view s, Action& out) {
  constexpr std::string_view overlap = ")OVERLAP_F_B";
  if (s.front() != '(') {
    out = Action::single(Task());
    return parse_single(c, s, out.task);
  }
  if (s.size() < overlap.size() + 1 || s.substr(s.size() - overlap.size()) != overlap)
    bad_cell(c, "a parenthesised action must be an overlapped pair '(...)OVERLAP_F_B'");
  const std::string_view inner = s.substr(1, s.size() - 1 - overlap.size());
  const auto semi = inner.find(';');
  if (semi == std::string_view::npos || inner.find(';', semi + 1) != std::string_view::npos)
    bad_cell(c, "an overlapped pair joins exactly two actions, a forward and a backward");
  Task f, b;
  if (!parse_single(c, trim(inner.substr(0, semi)), f) ||
      !parse_single(c, trim(inner.substr(semi + 1)), b))
    bad_cell(c, "an overlapped pair joins compute actions");
  if (f.op != Op::F) std::swap(f, b);
  if (f.op != Op::F || (b.op != Op::B && b.op != Op::I))
    bad_cell(c, "an overlapped pair is a forward and a B or I");
  out = Action::pair(f, b);
  return true;
}

std::string pytorch_name(const Task& t) {
  return std::to_string(t.stage) + op_letter(t.op) + std::to_string(t.mb);
}

}  // namespace

RankLines parse_pytorch_csv(std::string_view text, std::string_view name) {
  text = without_bom(text);
  RankLines out;
  int line_no = 0;
  int blank_run = 0;  // blank lines after a row, not yet known to be ranks (csv.reader reads [])
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!trim(line).empty() && trim(line).front() == '#') {
      if (parse_placement_comment(line, line_no, name, out.header) && !out.ranks.empty())
        file_error(name, line_no, "the placement header must come before the first row");
      continue;
    }
    if (trim(line).empty()) {
      if (!out.ranks.empty()) ++blank_run;
      continue;
    }
    // A blank line between rows is an idle rank, as for PyTorch; leading and trailing ones, as
    // around a header comment or at the end of a file, are no ranks (`,` is an idle rank anywhere).
    // The bound is checked before the idle ranks are made: a file of blank lines is small on disk.
    if (out.ranks.size() + static_cast<std::size_t>(blank_run) >=
        static_cast<std::size_t>(kMaxFileRanks))
      file_error(name, line_no,
                 "more than " + std::to_string(kMaxFileRanks) + " rows (ranks; allowed: 1 to " +
                     std::to_string(kMaxFileRanks) + ", as --devices)");
    for (; blank_run > 0; --blank_run) {
      out.ranks.emplace_back();
      out.line.push_back(line_no - blank_run);
    }
    const int rank = static_cast<int>(out.ranks.size());
    std::vector<Action> actions;
    std::size_t start = 0;
    while (start <= line.size()) {
      const auto comma = line.find(',', start);
      std::string_view cell = trim(line.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
      start = comma == std::string_view::npos ? line.size() + 1 : comma + 1;
      // csv.writer quotes no action (none holds a comma or a quote), but a spreadsheet might.
      if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"')
        cell = trim(cell.substr(1, cell.size() - 2));
      if (cell.empty()) continue;  // an idle step
      Action a;
      if (parse_cell({cell, rank, line_no, name}, cell, a))
        actions.push_back(a);
      else
        ++out.skipped_comm;
    }
    out.ranks.push_back(std::move(actions));
    out.line.push_back(line_no);
  }
  return out;
}

std::string to_pytorch_csv(const Schedule& s) {
  std::string out;
  if (s.placement.chains() > 1) out += "# placement: " + placement_header_text(s.placement) + "\n";
  for (const auto& rank : s.ranks) {
    // An idle rank as a row of two idle cells: a blank row is one only between other rows (a
    // file's trailing blank lines are no ranks), and PyTorch reads ',' as an idle rank too.
    if (rank.empty()) out += ',';
    for (std::size_t k = 0; k < rank.size(); ++k) {
      if (k) out += ',';
      const Action& a = rank[k];
      out += a.paired()
                 ? "(" + pytorch_name(a.task) + ";" + pytorch_name(a.partner) + ")OVERLAP_F_B"
                 : pytorch_name(a.task);
    }
    out += '\n';
  }
  return out;
}

}  // namespace ppbench
