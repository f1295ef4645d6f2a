// The time-step grid of `ppbench show --format grid`: one row per rank, one
// column per time unit, like the pipeline figures of the papers and slides.
#pragma once

#include <string>

#include "harness/trace.h"
#include "schedules/placement.h"

namespace ppbench {

// Cells show op and micro-batch ("F3"); when a rank holds several stages the
// stage is kept too ("F3.1", the text form). Idle units are shown as ".".
// Requires event boundaries on whole time units (integer costs).
std::string render_grid(const Trace& trace, const Placement& placement);

}  // namespace ppbench
