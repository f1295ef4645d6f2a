// Shared by the schedule tests: generate + validate + simulate + metrics in
// one call, with uniform per-stage costs.
#pragma once

#include <random>
#include <string>

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

// Schedules of every family in turn, at random D <= max_d, N <= max_n and v <= max_v, for
// `trials` draws; the draws a family does not allow are skipped. Returns how many ran.
template <class Check>
inline int for_random_schedules(std::mt19937& rng, int trials, int max_d, int max_n, int max_v,
                                Check&& check) {
  std::uniform_int_distribution<int> pick_d(1, max_d), pick_n(1, max_n), pick_v(2, max_v);
  int checked = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const auto& info = all_schedules()[trial % all_schedules().size()];
    ScheduleParams p{std::string(info.name), pick_d(rng), pick_n(rng),
                     info.uses_chunks ? pick_v(rng) : 0, 0};
    Schedule s;
    try {
      s = generate(p);
    } catch (const UsageError&) {
      continue;  // parameters this family does not allow
    }
    check(trial, info, p, s);
    ++checked;
  }
  return checked;
}

// The message of the InvalidSchedule that `f` throws, "" if it throws none.
template <class F>
std::string invalid_schedule_message(F&& f) {
  try {
    f();
  } catch (const InvalidSchedule& e) {
    return e.what();
  }
  return "";
}

inline UniformCost uniform(const StageCost& c) { return {c.f, c.b, c.i, c.w, c.fb}; }

}  // namespace ppbench::testing
