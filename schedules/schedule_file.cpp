#include "schedules/schedule_file.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "core/user_file.h"

namespace ppbench {

namespace {

bool parse_count(std::string_view text, int& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size() && out >= 0;
}

const char* const kPlacements =
    "linear, interleaved v=N, v-shape, bidirectional, stage-ranks R0,R1,... (stage s on rank Rs)";

// Where the task that sets a bound was read, to name it when the bound is refused.
struct Where {
  int rank = -1;
  const Action* action = nullptr;
};

std::string at(const Where& w) {
  return "rank " + std::to_string(w.rank) + ", action " + to_string(*w.action) + ": ";
}

// Each (stage, micro-batch) needs at least two tasks (F and B, or F, I and W): a file of T tasks
// cannot describe more than T/2 of them, so larger numbers are refused before they size anything.
void require_tasks(const RankLines& in, std::string_view name, const Where& w, double pairs,
                   double tasks, const std::string& what) {
  if (2 * pairs <= tasks) return;
  file_error(name, in.line[static_cast<std::size_t>(w.rank)],
             at(w) + what + " needs " + std::to_string(static_cast<long long>(pairs)) +
                 " (stage, micro-batch) pairs, at least " +
                 std::to_string(static_cast<long long>(2 * pairs)) + " tasks, but the file has " +
                 std::to_string(static_cast<long long>(tasks)) +
                 " (each pair needs an F and a B, or an F, an I and a W)");
}

template <typename F>
void for_each_task(const RankLines& in, F&& f) {
  for (std::size_t r = 0; r < in.ranks.size(); ++r)
    for (const Action& a : in.ranks[r]) {
      f(static_cast<int>(r), a, a.task);
      if (a.paired()) f(static_cast<int>(r), a, a.partner);
    }
}

// The lowest stage that no task names, below the highest one that a task does; -1 where there
// is none. Sized by the tasks, not by the largest stage number, so that it can come before
// the task-count bound: a file that skips a stage is told so, not that it is too short.
int first_missing_stage(const RankLines& in) {
  std::vector<int> stages;
  for_each_task(in, [&](int, const Action&, const Task& t) { stages.push_back(t.stage); });
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (stages[s] != static_cast<int>(s)) return static_cast<int>(s);
  return -1;
}

// Without a header each stage's rank is the one whose row runs it: a stage no row runs has
// none. Named on the line of the highest stage, which is what implies the missing one.
void require_every_stage(const RankLines& in, std::string_view name, const Where& top_stage,
                         int max_stage) {
  const int missing = first_missing_stage(in);
  if (missing < 0) return;
  file_error(name, in.line[static_cast<std::size_t>(top_stage.rank)],
             at(top_stage) + "stage " + std::to_string(missing) +
                 " is never run, so its rank is unknown (stages 0.." + std::to_string(max_stage) +
                 " must each appear, or a '# placement:' header give their ranks)");
}

// Micro-batches are numbered 0..N-1 in each chain: a file that skips one is told which, not
// that it is too short of tasks (which it also is). Sized by the tasks, as first_missing_stage,
// and named on the line of the chain's highest micro-batch, the one that implies the missing.
void require_every_microbatch(const RankLines& in, std::string_view name, const Placement& p) {
  std::vector<std::pair<int, int>> seen;  // (chain, micro-batch)
  for_each_task(in, [&](int, const Action&, const Task& t) {
    if (t.stage < p.stages())
      seen.emplace_back(p.stage_chain[static_cast<std::size_t>(t.stage)], t.mb);
  });
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  int chain = -1, missing = -1;
  for (std::size_t k = 0, next = 0; k < seen.size() && missing < 0; ++k, ++next) {
    if (k == 0 || seen[k].first != seen[k - 1].first) next = 0;
    if (seen[k].second != static_cast<int>(next))
      chain = seen[k].first, missing = static_cast<int>(next);
  }
  if (missing < 0) return;
  Where top;
  int top_mb = -1;
  for_each_task(in, [&](int r, const Action& a, const Task& t) {
    if (t.stage < p.stages() && p.stage_chain[static_cast<std::size_t>(t.stage)] == chain &&
        t.mb > top_mb)
      top_mb = t.mb, top = {r, &a};
  });
  file_error(name, in.line[static_cast<std::size_t>(top.rank)],
             at(top) + "micro-batch " + std::to_string(missing) +
                 (p.chains() > 1 ? " of chain " + std::to_string(chain) : std::string()) +
                 " is never run (micro-batches 0.." + std::to_string(top_mb) +
                 " must each appear)");
}

// A single chain with each stage on the rank that runs it (PyTorch's own inference, _load_csv);
// every stage below `stages` is run somewhere (require_every_stage).
Placement infer_placement(const RankLines& in, std::string_view name, int stages) {
  std::vector<int> stage_rank(static_cast<std::size_t>(stages), -1);
  std::vector<int> first_line(static_cast<std::size_t>(stages), 0);
  for_each_task(in, [&](int r, const Action& a, const Task& t) {
    const auto s = static_cast<std::size_t>(t.stage);
    const int line = in.line[static_cast<std::size_t>(r)];
    if (stage_rank[s] < 0) {
      stage_rank[s] = r;
      first_line[s] = line;
    } else if (stage_rank[s] != r) {
      file_error(name, line,
                 "rank " + std::to_string(r) + ", action " + to_string(a) + ": stage " +
                     std::to_string(t.stage) + " already runs on rank " +
                     std::to_string(stage_rank[s]) + " (line " + std::to_string(first_line[s]) +
                     "); a stage lives on one rank");
    }
  });
  return Placement::single_chain(static_cast<int>(in.ranks.size()), std::move(stage_rank), 0);
}

Placement header_placement(const RankLines& in, std::string_view name) {
  const int d = static_cast<int>(in.ranks.size());
  const PlacementHeader& h = in.header;
  switch (h.kind) {
    case PlacementHeader::Kind::kNone:
    case PlacementHeader::Kind::kLinear:
      return Placement::linear(d, 0);
    case PlacementHeader::Kind::kInterleaved:
      return Placement::interleaved(d, h.chunks, 0);
    case PlacementHeader::Kind::kVShape:
      return Placement::v_shape(d, 0);
    case PlacementHeader::Kind::kBidirectional:
      return Placement::bidirectional(d, 0, 0);
    case PlacementHeader::Kind::kStageRanks:
      for (std::size_t s = 0; s < h.stage_rank.size(); ++s)
        if (h.stage_rank[s] >= d)
          file_error(name, h.line,
                     "placement stage-ranks: stage " + std::to_string(s) + " on rank " +
                         std::to_string(h.stage_rank[s]) + ", but the file lists ranks 0.." +
                         std::to_string(d - 1));
      return Placement::single_chain(d, h.stage_rank, 0);
  }
  return {};
}

std::string basename_of(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

bool same_layout(const Placement& a, const Placement& b) {
  return a.ranks == b.ranks && a.stage_rank == b.stage_rank && a.chain_begin == b.chain_begin &&
         a.chain_end == b.chain_end;
}

// `0,1,1,0`: the rank of each stage. Every comma must be followed by a rank, so that a list
// cut short (`0,1,`) is not read as a shorter placement.
std::vector<int> parse_stage_ranks(std::string_view list, int line, std::string_view name) {
  if (list.empty())
    file_error(name, line, "placement stage-ranks needs the rank of each stage, e.g. 0,1,1,0");
  std::vector<int> stage_rank;
  for (std::size_t start = 0; start <= list.size();) {
    const auto comma = list.find(',', start);
    const std::string_view item = trim(list.substr(start, comma - start));
    start = comma == std::string_view::npos ? list.size() + 1 : comma + 1;
    if (item.empty())
      file_error(name, line,
                 "placement stage-ranks " + quoted(list) + ": no rank for stage " +
                     std::to_string(stage_rank.size()) +
                     (comma == std::string_view::npos ? " after the last comma"
                      : stage_rank.empty()            ? " before the first comma"
                                                      : " between two commas") +
                     " (allowed: one rank 0.." + std::to_string(kMaxFileRanks - 1) +
                     " per stage, comma-separated, e.g. 0,1,1,0)");
    int r = 0;
    if (!parse_count(item, r) || r >= kMaxFileRanks)
      file_error(name, line,
                 "placement stage-ranks: " + quoted(item) + " is not a rank (allowed: 0.." +
                     std::to_string(kMaxFileRanks - 1) + ")");
    if (stage_rank.size() >= static_cast<std::size_t>(kMaxFileStages))
      file_error(name, line,
                 "placement stage-ranks: more than " + std::to_string(kMaxFileStages) + " stages");
    stage_rank.push_back(r);
  }
  return stage_rank;
}

}  // namespace

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string_view without_bom(std::string_view text) {
  constexpr std::string_view bom = "\xEF\xBB\xBF";
  return text.substr(0, bom.size()) == bom ? text.substr(bom.size()) : text;
}

void file_error(std::string_view name, int line, const std::string& message) {
  throw UsageError(printable(name) + (line > 0 ? ":" + std::to_string(line) : "") + ": " + message);
}

bool parse_placement_comment(std::string_view comment, int line, std::string_view name,
                             PlacementHeader& header) {
  std::string_view body = trim(comment.substr(comment.find('#') + 1));
  constexpr std::string_view key = "placement:";
  if (body.substr(0, key.size()) != key) return false;
  if (header.kind != PlacementHeader::Kind::kNone)
    file_error(
        name, line,
        "a second placement header (the first is on line " + std::to_string(header.line) + ")");
  body = trim(body.substr(key.size()));
  const auto space = body.find_first_of(" \t");
  const std::string_view kind = body.substr(0, space);
  const std::string_view arg =
      space == std::string_view::npos ? std::string_view() : trim(body.substr(space));
  header.line = line;
  auto no_argument = [&](PlacementHeader::Kind k) {
    if (!arg.empty())
      file_error(name, line,
                 "placement " + std::string(kind) + " takes no argument, got " + quoted(arg));
    header.kind = k;
  };
  if (kind == "linear") {
    no_argument(PlacementHeader::Kind::kLinear);
  } else if (kind == "v-shape") {
    no_argument(PlacementHeader::Kind::kVShape);
  } else if (kind == "bidirectional") {
    no_argument(PlacementHeader::Kind::kBidirectional);
  } else if (kind == "interleaved") {
    int v = 0;
    if (arg.substr(0, 2) != "v=" || !parse_count(arg.substr(2), v) || v < 1 || v > 1024)
      file_error(name, line,
                 "placement interleaved needs v=N with N from 1 to 1024 model chunks per rank, "
                 "got " +
                     quoted(arg));
    header.kind = PlacementHeader::Kind::kInterleaved;
    header.chunks = v;
  } else if (kind == "stage-ranks") {
    header.stage_rank = parse_stage_ranks(arg, line, name);
    header.kind = PlacementHeader::Kind::kStageRanks;
  } else {
    file_error(name, line, "unknown placement " + quoted(kind) + " (allowed: " + kPlacements + ")");
  }
  return true;
}

RankLines parse_text_rank_lines(std::string_view text, std::string_view name) {
  text = without_bom(text);
  RankLines out;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const std::string_view raw =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    const auto hash = raw.find('#');
    const std::string_view line = trim(raw.substr(0, hash));
    if (hash != std::string_view::npos && line.empty()) {
      // A header belongs before the rank lines, where a reader looks for it.
      if (parse_placement_comment(raw, line_no, name, out.header) && !out.ranks.empty())
        file_error(name, line_no, "the placement header must come before the first rank line");
      continue;
    }
    if (line.empty()) continue;
    const std::string expected = "rank " + std::to_string(out.ranks.size()) + ":";
    std::istringstream words{std::string(line)};
    std::string head, label;
    words >> head >> label;
    if (head != "rank" || label != expected.substr(5))
      file_error(name, line_no,
                 "expected " + quoted(expected + " ...") +
                     " (ranks listed 0, 1, 2, ... one per line), got " + quoted(line));
    if (out.ranks.size() >= static_cast<std::size_t>(kMaxFileRanks))
      file_error(name, line_no,
                 "more than " + std::to_string(kMaxFileRanks) + " ranks (allowed: 1 to " +
                     std::to_string(kMaxFileRanks) + ", as --devices)");
    const int rank = static_cast<int>(out.ranks.size());
    std::vector<Action> actions;
    std::string token;
    while (words >> token) {
      try {
        actions.push_back(parse_action(token, kMaxFileStages - 1));
      } catch (const UsageError& e) {
        file_error(name, line_no, "rank " + std::to_string(rank) + ": " + e.what());
      }
    }
    out.ranks.push_back(std::move(actions));
    out.line.push_back(line_no);
  }
  return out;
}

ScheduleFileFormat detect_format(std::string_view path, std::string_view text) {
  if (path.size() >= 4 && path.substr(path.size() - 4) == ".csv")
    return ScheduleFileFormat::kPytorchCsv;
  text = without_bom(text);
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const std::string_view line =
        trim(text.substr(pos, nl == std::string_view::npos ? nl : nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.empty() || line.front() == '#') continue;
    return line.substr(0, 4) == "rank" ? ScheduleFileFormat::kText
                                       : ScheduleFileFormat::kPytorchCsv;
  }
  return ScheduleFileFormat::kText;
}

ScheduleFile parse_schedule_file(std::string_view text, std::string_view name,
                                 ScheduleFileFormat format) {
  RankLines in = format == ScheduleFileFormat::kText ? parse_text_rank_lines(text, name)
                                                     : parse_pytorch_csv(text, name);
  double tasks = 0;
  Where top_stage, top_mb;
  int max_stage = -1, max_mb = -1;
  for_each_task(in, [&](int r, const Action& a, const Task& t) {
    const int line = in.line[static_cast<std::size_t>(r)];
    if (t.stage >= kMaxFileStages)
      file_error(name, line,
                 "rank " + std::to_string(r) + ", action " + to_string(a) + ": stage " +
                     std::to_string(t.stage) + " is out of range (allowed: 0.." +
                     std::to_string(kMaxFileStages - 1) + ", 4096 ranks x 1024 chunks)");
    if (t.mb >= kMaxFileMicrobatches)
      file_error(name, line,
                 "rank " + std::to_string(r) + ", action " + to_string(a) + ": micro-batch " +
                     std::to_string(t.mb) + " is out of range (allowed: 0.." +
                     std::to_string(kMaxFileMicrobatches - 1) + ", as --microbatches)");
    tasks += 1;
    if (t.stage > max_stage) max_stage = t.stage, top_stage = {r, &a};
    if (t.mb > max_mb) max_mb = t.mb, top_mb = {r, &a};
  });
  if (tasks == 0)
    file_error(name, 0,
               "no actions (expected lines such as 'rank 0: F0.0 B0.0', or PyTorch CSV rows "
               "such as '0F0,0B0')");

  const bool infer =
      format == ScheduleFileFormat::kPytorchCsv && in.header.kind == PlacementHeader::Kind::kNone;
  if (infer) {
    // A skipped stage first: it also leaves the file short of tasks, but is the cause to name.
    require_every_stage(in, name, top_stage, max_stage);
    require_tasks(in, name, top_stage, max_stage + 1.0, tasks,
                  "stage " + std::to_string(max_stage) + " makes " + std::to_string(max_stage + 1) +
                      " stages, which");
  }
  Placement p = infer ? infer_placement(in, name, max_stage + 1) : header_placement(in, name);
  require_every_microbatch(in, name, p);
  // Micro-batches per chain: as many as the file's largest number in that chain says.
  std::vector<int> chain_mb(static_cast<std::size_t>(p.chains()), 0);
  for_each_task(in, [&](int, const Action&, const Task& t) {
    if (t.stage < p.stages()) {
      int& n = chain_mb[static_cast<std::size_t>(p.stage_chain[static_cast<std::size_t>(t.stage)])];
      n = std::max(n, t.mb + 1);
    }
  });
  // Two directions hold every stage twice (the records' parameter copies): a chain with no work
  // would be a one-chain pipeline reported as a two-chain one.
  for (int c = 0; p.chains() > 1 && c < p.chains(); ++c)
    if (chain_mb[static_cast<std::size_t>(c)] == 0)
      file_error(name, 0,
                 "chain " + std::to_string(c) + " (stages " + std::to_string(p.chain_begin[c]) +
                     ".." + std::to_string(p.chain_end[c] - 1) +
                     ") carries no micro-batch (allowed: the bidirectional placement with work "
                     "in both directions; for one direction use another placement)");
  double pairs = 0;
  for (int c = 0; c < p.chains(); ++c)
    pairs += static_cast<double>(p.chain_length(c)) * chain_mb[static_cast<std::size_t>(c)];
  require_tasks(
      in, name, top_mb, pairs, tasks,
      "micro-batch " + std::to_string(max_mb) + " on " + std::to_string(p.stages()) + " stages");
  p.chain_microbatches = chain_mb;

  ScheduleFile out;
  out.name = std::string(name);
  out.rank_line = in.line;
  out.skipped_comm = in.skipped_comm;
  Schedule& s = out.schedule;
  // Records, traces and tables carry the name: a file name need not be UTF-8 or free of
  // control characters, so it is escaped once here.
  s.params.name = "file:" + printable(basename_of(name));
  s.params.devices = p.ranks;
  for (int n : chain_mb) s.params.microbatches += n;
  // Records say "chunks" for Megatron's layout however it was given (a header, or inferred).
  const int d = p.ranks;
  if (p.stages() > d && p.stages() % d == 0 &&
      same_layout(p, Placement::interleaved(d, p.stages() / d, 0)))
    s.params.chunks = p.stages() / d;
  s.placement = std::move(p);
  s.ranks = std::move(in.ranks);
  return out;
}

ScheduleFile read_schedule_file(const std::string& path, double max_bytes) {
  const std::string flag = "--schedule-file " + quoted(path);
  const auto size = user_file_size(flag, path, "a schedule in the text form or a PyTorch CSV");
  // Parsing holds the text and its actions: a few times the file's size.
  if (max_bytes > 0 && static_cast<double>(size) * 8 > max_bytes)
    throw UsageError(flag + " is " + std::to_string(size) +
                     " bytes; reading it needs about 8 times that, more than the memory allowed");
  const std::string text =
      read_user_file(flag, path, size, flag + ": it grew while it was read; read it again");
  // A file cut short while it was read could still parse, as another schedule.
  if (text.size() != size) throw UsageError(flag + ": it shrank while it was read; read it again");
  return parse_schedule_file(text, path, detect_format(path, text));
}

void validate_file(const ScheduleFile& f, const ValidateOptions& options) {
  try {
    validate(f.schedule, options);
  } catch (const InvalidSchedule& e) {
    const int r = e.rank();
    const bool known = r >= 0 && static_cast<std::size_t>(r) < f.rank_line.size();
    throw InvalidSchedule(
        f.name + (known ? ":" + std::to_string(f.rank_line[static_cast<std::size_t>(r)]) : "") +
            ": " + e.what(),
        r);
  }
}

std::string placement_header_text(const Placement& p) {
  const int d = p.ranks;
  if (same_layout(p, Placement::linear(d, 0))) return "";
  if (p.chains() == 1 && p.stages() % d == 0 &&
      same_layout(p, Placement::interleaved(d, p.stages() / d, 0)))
    return "interleaved v=" + std::to_string(p.stages() / d);
  if (same_layout(p, Placement::v_shape(d, 0))) return "v-shape";
  if (same_layout(p, Placement::bidirectional(d, 0, 0))) return "bidirectional";
  if (p.chains() != 1)
    throw UsageError("this placement of " + std::to_string(p.chains()) +
                     " chains has no schedule-file header (allowed: " + kPlacements + ")");
  std::string out = "stage-ranks ";
  for (int s = 0; s < p.stages(); ++s)
    out += (s ? "," : "") + std::to_string(p.stage_rank[static_cast<std::size_t>(s)]);
  return out;
}

std::string to_schedule_text(const Schedule& s) {
  const std::string header = placement_header_text(s.placement);
  return (header.empty() ? std::string() : "# placement: " + header + "\n") + to_text(s);
}

}  // namespace ppbench
