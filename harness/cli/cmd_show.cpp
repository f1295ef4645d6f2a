#include <iostream>

#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#include "harness/grid.h"
#include "harness/simulator.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

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
  };
  auto st = std::make_shared<State>();
  st->schedule.add_to(*app);
  app->add_option("--format", st->format,
                  "text: per-rank action lists; grid: a time-step grid (simulated with --cost); "
                  "lowered: the per-rank program with the derived sends and receives")
      ->check(CLI::IsMember({"text", "grid", "lowered"}));
  st->costs.add_to(*app);
  app->footer("Example: ppbench show --schedule 1f1b --devices 4 --microbatches 8 --format grid");
  return [st] {
    const Schedule s = generate(st->schedule.params());
    validate(s);
    if (st->format == "text") {
      std::cout << to_text(s);
    } else if (st->format == "lowered") {
      std::cout << to_text(lower(s));
    } else {
      const StageCost c = st->costs.resolve();
      const Trace t = simulate(s, CostModel::uniform(s.stages(), c), {.record_comm = false});
      std::cout << render_grid(t, s.placement);
    }
  };
}

}  // namespace ppbench::cli
