#include "harness/cli/options.h"

#include <cmath>

#include "schedules/error.h"

namespace ppbench::cli {

void ScheduleFlags::add_to(CLI::App& app) {
  app.add_option("-s,--schedule", schedule, "Schedule family (see `ppbench list`)")->required();
  app.add_option("-d,--devices", devices, "Pipeline ranks D")->required()->check(CLI::Range(1, 4096));
  app.add_option("-n,--microbatches", microbatches, "Micro-batches per training step N (all chains)")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-v,--chunks", chunks, "Model chunks per rank v (interleaved-1f1b only; default 2)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--group-size", group_size,
                 "Megatron's micro-batch group size per virtual stage (interleaved-1f1b only; "
                 "default D, allowed D..N)")
      ->check(CLI::Range(1, 1 << 20));
}

void CostFlags::add_to(CLI::App& app) {
  app.add_option("--cost", cost,
                 "Per-stage action costs, e.g. F=1,B=2,I=1,W=1,FB=3. Given only B: I = W = B/2; "
                 "given I and W: B = I + W; FB defaults to F + B. Defaults F=1, I=1, W=1");
  app.add_option("--comm", comm,
                 "Time between an action on one rank and a dependent action on another rank "
                 "(default 0)");
}

StageCost CostFlags::resolve() const {
  if (!std::isfinite(comm) || comm < 0)
    throw UsageError("--comm must be a non-negative number, got " + std::to_string(comm));
  return ppbench::resolve(parse_cost_spec(cost), comm);
}

}  // namespace ppbench::cli
