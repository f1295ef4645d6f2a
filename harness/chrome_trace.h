// Chrome / Perfetto trace export (chrome://tracing, ui.perfetto.dev).
//
// Compute events go to process 0 with one thread per rank; transfers to
// process 1. Cost-model time units are written as milliseconds (1 unit =
// 1000 us) so that simulated timelines read naturally in the viewer; real
// backends' seconds are written as they are.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/trace.h"

namespace ppbench {

nlohmann::json to_chrome_trace(const Trace& trace, const nlohmann::json& other_data);

// What a run's trace says of itself (its otherData), from the run's record: the provenance, and
// what a viewer or scripts/plot_timeline.py names the picture by: the schedule and its shape,
// and across processes the job's.
nlohmann::json trace_facts(const nlohmann::json& record);

}  // namespace ppbench
