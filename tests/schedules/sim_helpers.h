// Shared by the schedule tests: generate + validate + simulate + metrics in
// one call, with uniform per-stage costs.
#pragma once

#include "core/error.h"
#include "harness/cost_model.h"
#include "harness/metrics.h"
#include "harness/simulator.h"
#include "schedules/formulas.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace ppbench::testing {

struct Simulated {
  Schedule schedule;
  Trace trace;
  Metrics metrics;
};

inline StageCost stage_cost(double f, double i, double w, double comm = 0) {
  return {f, i + w, i, w, f + i + w, comm};
}

inline Simulated simulate_uniform(const ScheduleParams& p, const StageCost& c) {
  Simulated out;
  out.schedule = generate(p);
  validate(out.schedule);
  out.trace = simulate(out.schedule, CostModel::uniform(out.schedule.stages(), c));
  out.metrics = compute_metrics(out.trace, out.schedule.placement);
  return out;
}

inline UniformCost uniform(const StageCost& c) { return {c.f, c.b, c.i, c.w, c.fb}; }

}  // namespace ppbench::testing
