// An edited schedule handed to a backend the way a researcher's schedule file reaches it: through
// its text form (parse_schedule_file, "file:edited.txt" in the record) into
// RunOptions::file_schedule, with RunOptions::schedule the file's parameters, as `ppbench run
// --schedule-file` sets them. Shared by the edited-order tests of every backend.
#pragma once

#include <memory>

#include "harness/backends/run_options.h"
#include "schedules/schedule_file.h"

namespace ppbench::edits {

inline RunOptions run_options_for_file(const Schedule& s) {
  const ScheduleFile file =
      parse_schedule_file(to_schedule_text(s), "edited.txt", ScheduleFileFormat::kText);
  RunOptions o;
  o.schedule = file.schedule.params;
  o.file_schedule = std::make_shared<const Schedule>(file.schedule);
  return o;
}

}  // namespace ppbench::edits
