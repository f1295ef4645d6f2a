#include "schedules/registry.h"

#include <array>

#include "schedules/error.h"

namespace ppbench {

namespace {

constexpr std::array kSchedules = {
    ScheduleInfo{"naive", "naive model parallelism: one micro-batch through the whole pipeline at a time",
                 "D >= 1, N >= 1", false, generate_naive},
    ScheduleInfo{"gpipe", "GPipe: all forwards, then all backwards (Huang et al. 2019)",
                 "D >= 1, N >= 1", false, generate_gpipe},
    ScheduleInfo{"1f1b", "1F1B / PipeDream-Flush / DAPPLE, Megatron's warm-up of D-r-1 forwards",
                 "N >= D", false, generate_1f1b},
    ScheduleInfo{"interleaved-1f1b", "Megatron's interleaved 1F1B (virtual pipeline), v chunks per rank",
                 "--chunks v >= 2; --group-size g (default D), D <= g <= N; N mod g != 0 only where it cannot deadlock", true,
                 generate_interleaved_1f1b},
    ScheduleInfo{"chimera", "Chimera: two bidirectional pipelines, 2x parameters (Li & Hoefler 2021)",
                 "D even, N a multiple of D", false, generate_chimera},
    ScheduleInfo{"zb-h1", "Zero Bubble ZB-H1: 1F1B with W deferred, 1F1B's memory (Qi et al. 2024)",
                 "N >= D", false, generate_zb_h1},
    ScheduleInfo{"zb-h2", "Zero Bubble ZB-H2: extra warm-up forwards fill the bubble, 2D-1 activations",
                 "N >= 2D-1", false, generate_zb_h2},
    ScheduleInfo{"zb-v", "Zero Bubble ZB-V: V-shaped placement, two stages per rank",
                 "any N >= 1 (zero bubble needs N >= 2D-1)", false, generate_zb_v},
    ScheduleInfo{"dualpipe", "DeepSeek DualPipe: two directions, overlapped F&B, eight steps",
                 "D even, N even, N >= 2D", false, generate_dualpipe},
    ScheduleInfo{"dualpipev", "DeepSeek DualPipeV: DualPipe folded into a V on D ranks",
                 "N >= 2D", false, generate_dualpipev},
};

std::string known_names() {
  std::string names;
  for (const auto& s : kSchedules) {
    if (!names.empty()) names += ", ";
    names += s.name;
  }
  return names;
}

}  // namespace

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

std::span<const ScheduleInfo> all_schedules() { return kSchedules; }

const ScheduleInfo& find_schedule(std::string_view name) {
  for (const auto& s : kSchedules)
    if (s.name == name) return s;
  throw UsageError("unknown schedule '" + std::string(name) + "' (known: " + known_names() + ")");
}

Schedule generate(const ScheduleParams& p) {
  const ScheduleInfo& info = find_schedule(p.name);
  require(p.devices >= 1, "--devices must be >= 1, got " + std::to_string(p.devices));
  require(p.microbatches >= 1, "--microbatches must be >= 1, got " + std::to_string(p.microbatches));
  if (!info.uses_chunks) {
    require(p.chunks == 0 || p.chunks == 1,
            "--chunks " + std::to_string(p.chunks) + " is not allowed for '" + std::string(p.name) +
                "': only interleaved-1f1b takes --chunks");
    require(p.group_size == 0, "--group-size is not allowed for '" + std::string(p.name) +
                                   "': only interleaved-1f1b takes --group-size");
  }
  Schedule s = info.generate(p);
  s.params = p;
  s.params.name = std::string(info.name);
  return s;
}

}  // namespace ppbench
