// What the schedule fuzz targets (fuzz_schedule_file.cpp, fuzz_schedule_edits.cpp) ask of the
// simulator for a schedule that validates, with eager hand-overs and by rendezvous: it runs to
// the end with every action placed once and no event ending before it starts, and
// simulate_metrics, which keeps no events, agrees with the metrics of the full trace.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/cost_model.h"
#include "harness/metrics.h"
#include "harness/simulator.h"
#include "schedules/schedule.h"
#include "tests/fuzz/fuzz_target.h"

namespace ppbench::fuzz {

// Unequal costs, so that a rank's order, not only its length, shapes the timeline.
inline CostModel unequal_costs(int stages) {
  StageCost c;
  c.f = 1, c.b = 2.5, c.i = 1.25, c.w = 1.25, c.fb = 3.25, c.comm = 0.5;
  return CostModel::uniform(stages, c);
}

// The same costs with every hand-over by rendezvous, which the simulator times with its event
// walk (a device per rank).
inline CostModel rendezvous_costs(int stages) {
  std::vector<StageCost> c = unequal_costs(stages).stages();
  for (StageCost& x : c) {
    x.rendezvous = true;
    x.handshake = 0.125;
  }
  return CostModel(c);
}

inline void check_timeline(const Schedule& s, const CostModel& costs, int cores) {
  auto near = [](double a, double b) {
    return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b));
  };
  const Trace t = simulate(s, costs, {.record_comm = true, .cores = cores});
  fuzz_check(t.compute.size() == s.action_count(), "the trace does not hold every action once");
  for (const ComputeEvent& e : t.compute)
    fuzz_check(std::isfinite(e.start) && e.end >= e.start, "an event ends before it starts");
  const Metrics full = compute_metrics(t, s.placement);
  const Metrics streamed = simulate_metrics(s, costs, cores);
  fuzz_check(near(streamed.makespan, full.makespan), "simulate_metrics' makespan differs");
  fuzz_check(near(streamed.bubble_fraction, full.bubble_fraction),
             "simulate_metrics' bubble differs");
  fuzz_check(streamed.peak_activations == full.peak_activations,
             "simulate_metrics' peak activations differ");
}

inline void check_simulation(const Schedule& s, int cores) {
  check_timeline(s, unequal_costs(s.stages()), cores);
  check_timeline(s, rendezvous_costs(s.stages()), 0);
}

}  // namespace ppbench::fuzz
