#include <algorithm>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#include "harness/grid.h"
#include "harness/memory_estimate.h"
#include "harness/simulator.h"
#include "schedules/lower.h"
#include "schedules/schedule_file.h"

namespace ppbench::cli {

Command add_show(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "show",
      "Print a schedule: one line per rank in the text form (F3.1 = forward of stage 3, "
      "micro-batch 1; B, I, W likewise; (F0.7+B15.3) an overlapped pair)");
  struct State {
    ScheduleFlags schedule;
    CostFlags costs;
    std::string format = "text";
    MemoryFlag memory;
  };
  auto st = std::make_shared<State>();
  st->schedule.add_to(*app);
  app->add_option("--format", st->format,
                  "text: per-rank action lists; grid: a time-step grid (simulated with --cost); "
                  "lowered: the per-rank program with the derived sends and receives; csv: "
                  "PyTorch's pipeline CSV (torch.distributed.pipelining _load_csv)")
      ->check(one_of({"text", "grid", "lowered", "csv"}));
  st->costs.add_to(*app);
  st->memory.add_to(*app);
  app->footer(
      "Example: ppbench show --schedule 1f1b --devices 4 --microbatches 8 --format grid\n"
      "         ppbench show --schedule-file my_schedule.txt --format csv > my_schedule.csv");
  return [st] {
    const StageCost c = st->costs.resolve();  // checked whatever the format
    const MemoryBudget budget = st->memory.budget();
    st->schedule.plan_for(c);
    const ScheduleParams params = st->schedule.resolve(budget);
    const std::string what = "show " + st->schedule.describe() + " --format " + st->format;
    require_memory(budget, estimate_show(params, st->format), what);
    const Schedule s = st->schedule.build();
    if (st->format == "text") {
      // With its placement header where that is not one stage per rank, so that the output
      // reads back with --schedule-file.
      std::cout << to_schedule_text(s);
    } else if (st->format == "csv") {
      std::cout << to_pytorch_csv(s);
    } else if (st->format == "lowered") {
      std::cout << to_text(lower(s));
    } else {
      const Trace t = simulate(s, CostModel::uniform(s.stages(), c), {.record_comm = false});
      // The grid has a cell per rank and time unit: long costs make it wide before it is drawn.
      double end = 0;
      for (const auto& e : t.compute) end = std::max(end, e.end);
      const std::size_t width =
          4 + std::to_string(s.params.microbatches).size() +
          (s.stages() > s.placement.ranks ? std::to_string(s.stages()).size() + 1 : 0);
      require_memory(budget, estimate_grid(s.placement.ranks, end, 2 * width), what);
      std::cout << render_grid(t, s.placement);
    }
  };
}

}  // namespace ppbench::cli
