// `ppbench tune`: the search over schedules for a workload on D ranks under a per-rank activation
// memory limit (docs/schedules.md, "Choosing a schedule: tune").
//
// The space: every registered family x chunks v (1..4 for the families with chunks) x the
// micro-batch counts N that divide the global batch B within [D, 8D] (micro-batches of B/N
// samples each). Every candidate is costed as `simulate --workload` costs it (the same
// per-stage costs, the same re-planning of the cost-aware families, the same metrics and
// predicted peak bytes), so its predicted step time is what `simulate` prints for it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/cli/simulate_workload.h"

namespace ppbench::cli {

enum class TuneStatus { kFits, kOverMemory, kInvalid };
const char* status_name(TuneStatus s);

struct TuneCandidate {
  std::string schedule;
  int chunks = 0;  // 0: a family without chunks
  int microbatches = 0;
  std::int64_t microbatch_size = 0;
  TuneStatus status = TuneStatus::kInvalid;
  std::string reason;   // why it is over memory or invalid; empty when it fits
  double makespan = 0;  // seconds
  double bubble_fraction = 0;
  std::vector<double> peak_bytes;  // per rank
  double max_peak_bytes() const;
  // "zb-h1 N=16 b=4", with " v=2" for a family with chunks.
  std::string label() const;
};

// The search's parameters once the flags are checked.
struct TuneSpace {
  int devices = 0;
  std::int64_t global_batch = 0;
  std::vector<int> microbatch_counts;  // ascending
  std::vector<int> chunk_counts{1, 2, 3, 4};
};

// The divisors N of `global_batch` with devices <= N <= 8 devices, ascending.
std::vector<int> microbatch_counts(int devices, std::int64_t global_batch);

// Every candidate of the space, in the order of the registry, then v, then N; not yet costed.
std::vector<TuneCandidate> enumerate_candidates(const TuneSpace& space);

// One candidate's work in simulated tasks, from the parameters alone, for the bound on the
// search's size and the progress line: the tasks the simulation walks over (memory_estimate.h's
// schedule_tasks), and for the families whose generator packs slot rows (v-half, v-min) the
// generator's squeeze on top, which costs about sqrt(D) / 4 tasks' worth per task (see the .cpp).
double candidate_tasks(int devices, const TuneCandidate& c);

// candidate_tasks summed over the space.
double search_tasks(const TuneSpace& space, const std::vector<TuneCandidate>& all);

// Costs every candidate: generate (a UsageError makes it invalid, with the generator's words),
// partition the workload at its micro-batch size, plan the cost-aware families for those costs,
// check the structure, simulate the metrics, predict the peak bytes per rank against
// `w.memory_limit`. `progress(done, next)` is called before each candidate, with how many are
// done and the one about to be costed, so that a long candidate is named while it runs.
void evaluate_candidates(std::vector<TuneCandidate>& all, const WorkloadCosts& w,
                         const WorkloadCostFlags& flags, int devices,
                         const std::function<void(std::size_t, const TuneCandidate&)>& progress);

// The candidates that fit, best first: shorter predicted step (at 12 significant digits), then
// less peak memory (the largest rank's), then the order of the space.
std::vector<const TuneCandidate*> ranked(const std::vector<TuneCandidate>& all);

}  // namespace ppbench::cli
