#include "harness/simulator.h"

#include <algorithm>

#include "core/error.h"
#include "schedules/deps.h"

namespace ppbench {

Trace simulate(const Schedule& s, const CostModel& costs, const SimulateOptions& options) {
  const Placement& p = s.placement;
  const TaskIndex index(p);
  std::vector<double> end(index.size(), 0.0);
  std::vector<double> free_at(p.ranks, 0.0);

  Trace trace;
  trace.ranks = p.ranks;
  // Events go straight to their final slot: rank r's block starts at offset[r].
  std::vector<std::size_t> offset(p.ranks + 1, 0);
  for (int r = 0; r < p.ranks; ++r) offset[r + 1] = offset[r] + s.ranks[r].size();
  trace.compute.resize(offset[p.ranks]);

  auto stall = walk_in_dependency_order(s, index, [&](int r, std::size_t pos, const Action& a) {
    double start = free_at[r];
    std::array<TaskIndex::Dep, 2> deps;
    for (int half = 0; half < (a.paired ? 2 : 1); ++half) {
      const Task& t = half == 0 ? a.task : a.partner;
      const int n = index.dependencies(t, deps);
      for (int k = 0; k < n; ++k) {
        const int producer = p.stage_rank[deps[k].stage];
        double arrive = end[deps[k].id];
        if (producer != r) {
          const double sent = arrive;
          arrive += costs.comm(deps[k].stage, t.stage);
          if (options.record_comm) trace.comm.push_back({producer, r, sent, arrive, deps[k].task});
        }
        start = std::max(start, arrive);
      }
    }
    const double finish = start + costs.time(a);
    end[index.id(a.task)] = finish;
    if (a.paired) end[index.id(a.partner)] = finish;
    free_at[r] = finish;
    trace.compute[offset[r] + pos] = {r, start, finish, a};
  });
  if (!stall.empty())
    throw InvalidSchedule("deadlock: rank " + std::to_string(stall[0].rank) + " action " +
                          to_string(stall[0].action) + " waits for " +
                          to_string(stall[0].waiting_for) + " (run the validator for the cause)");
  return trace;
}

}  // namespace ppbench
