// A researcher's own schedule, read from a file (docs/schedules.md, "Your own schedule").
//
// Two formats:
//   text: ppbench's text form, `rank 0: F0.0 F0.1 B0.0 ...` one line per rank (to_text), with
//     `#` comments and an optional `# placement: ...` header line before the first rank line;
//     without one, stage r lives on rank r.
//   csv: the compute-only CSV of PyTorch's torch.distributed.pipelining (_PipelineScheduleRuntime
//     _load_csv / _dump_csv): row r lists rank r's actions as `0F1` (stage 0, forward,
//     micro-batch 1), `1I0`, `2W3`, `0B0`, `(0F1;3B0)OVERLAP_F_B`, empty cells idle. Its
//     communication actions (SEND_F, RECV_B, UNSHARD, ...) are skipped: ppbench derives the
//     transfers from the placement (schedules/lower.h). Without a header the placement is one
//     chain with each stage on the rank whose row runs it.
//
// Every message names the file and line, `FILE:LINE: ...` (UsageError, InvalidSchedule), but
// that of a file with no action at all, which has no line to point at: `FILE: no actions ...`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/schedule.h"
#include "schedules/validate.h"

namespace ppbench {

enum class ScheduleFileFormat { kText, kPytorchCsv };

// The limits of a file, those of --devices, --chunks and --microbatches: checked on every token
// before anything is sized by it.
inline constexpr int kMaxFileRanks = 4096;
inline constexpr int kMaxFileStages = 4096 * 1024;
inline constexpr int kMaxFileMicrobatches = 1 << 20;

// A `# placement: ...` header line.
struct PlacementHeader {
  enum class Kind { kNone, kLinear, kInterleaved, kVShape, kBidirectional, kStageRanks };
  Kind kind = Kind::kNone;
  int chunks = 0;               // interleaved v=
  std::vector<int> stage_rank;  // stage-ranks 0,1,1,0
  int line = 0;
};

// What a format's parser reads, before the placement is settled (schedule_file.cpp).
struct RankLines {
  std::vector<std::vector<Action>> ranks;
  std::vector<int> line;  // rank -> 1-based line that lists it
  PlacementHeader header;
  std::size_t skipped_comm = 0;  // PyTorch communication actions skipped
};

struct ScheduleFile {
  std::string name;  // the path as given, for messages
  Schedule schedule;
  std::vector<int> rank_line;    // rank -> 1-based line that lists it
  std::size_t skipped_comm = 0;  // PyTorch communication actions skipped
};

// `.csv` names a PyTorch CSV; otherwise the first line that is neither blank nor a comment
// decides: `rank ...` is the text form, anything else CSV.
ScheduleFileFormat detect_format(std::string_view path, std::string_view text);

// Parses `text` (named `name` in messages, and "file:<basename>" in records) and settles its
// placement, D and N. Sizes are bounded before anything is allocated by them. Does not validate.
ScheduleFile parse_schedule_file(std::string_view text, std::string_view name,
                                 ScheduleFileFormat format);
// Reads and parses `path`; a missing, unreadable or non-regular file, or one larger than
// `max_bytes`, is a UsageError naming it.
ScheduleFile read_schedule_file(const std::string& path, double max_bytes);

// validate() with the failing rank's line in front: "FILE:LINE: invalid schedule: rank ...".
void validate_file(const ScheduleFile& f, const ValidateOptions& options = {});

// The text form with a `# placement:` header where the placement is not one stage per rank;
// read back by parse_schedule_file to the same schedule.
std::string to_schedule_text(const Schedule& s);
// The `# placement:` header's value for `p` ("interleaved v=2", ...), "" for one stage per rank.
// Throws UsageError for several chains in another layout than the two-direction one.
std::string placement_header_text(const Placement& p);

// The text form's and the CSV's own parsers (schedule_file.cpp, pytorch_csv.cpp).
RankLines parse_text_rank_lines(std::string_view text, std::string_view name);
RankLines parse_pytorch_csv(std::string_view text, std::string_view name);
// Reads a `# placement: ...` comment into `header`; false for any other comment.
bool parse_placement_comment(std::string_view comment, int line, std::string_view name,
                             PlacementHeader& header);
// PyTorch's compute-only CSV of `s`: one row per rank. A two-direction schedule gets a
// `# placement: bidirectional` line first, which PyTorch (one chain only) cannot read.
std::string to_pytorch_csv(const Schedule& s);

// `s` without leading and trailing blanks, tabs and carriage returns (both formats' lines).
std::string_view trim(std::string_view s);
// `text` without the UTF-8 byte-order mark that some editors (and Excel's "CSV UTF-8") write in
// front of the first line; both formats' parsers and detect_format skip it.
std::string_view without_bom(std::string_view text);

// "FILE:LINE: message" (UsageError).
[[noreturn]] void file_error(std::string_view name, int line, const std::string& message);

}  // namespace ppbench
