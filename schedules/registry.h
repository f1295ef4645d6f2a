// Every schedule family ppbench knows, by its CLI name, with the parameter
// constraints its paper or reference implementation imposes.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "schedules/schedule.h"

namespace ppbench {

struct ScheduleInfo {
  std::string_view name;         // CLI name: "1f1b"
  std::string_view title;        // "1F1B (PipeDream-Flush / DAPPLE), Megatron's warm-up"
  std::string_view constraints;  // human-readable, printed by `ppbench list`
  bool uses_chunks = false;      // accepts --chunks / --group-size
  Schedule (*generate)(const ScheduleParams&) = nullptr;
};

std::span<const ScheduleInfo> all_schedules();
// Throws UsageError listing the known names when `name` is unknown.
const ScheduleInfo& find_schedule(std::string_view name);
// Checks the generic parameters, rejects --chunks on a schedule without chunks,
// then calls the family's generator (which checks its own constraints).
Schedule generate(const ScheduleParams& params);

// One generator per family (schedules/generators/*.cpp). Each throws
// UsageError naming the parameter its definition does not allow.
Schedule generate_naive(const ScheduleParams& p);
Schedule generate_gpipe(const ScheduleParams& p);
Schedule generate_1f1b(const ScheduleParams& p);
Schedule generate_interleaved_1f1b(const ScheduleParams& p);
Schedule generate_chimera(const ScheduleParams& p);
Schedule generate_zb_h1(const ScheduleParams& p);
Schedule generate_zb_h2(const ScheduleParams& p);
Schedule generate_zb_v(const ScheduleParams& p);
Schedule generate_dualpipe(const ScheduleParams& p);
Schedule generate_dualpipev(const ScheduleParams& p);

// Shared by generators: throw UsageError(message) unless `ok`.
void require(bool ok, const std::string& message);

}  // namespace ppbench
