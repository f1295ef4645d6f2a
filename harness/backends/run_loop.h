// The run loop every backend's `ppbench run` shares (run_cpu, run_cuda): the warm-up and
// measured steps, each timed twice (the compute makespan of its trace, and the wall time of the
// whole step as the process spends it: zeroing gradients, starting the rank threads, the step,
// reading the loss), one progress line per step on request, the statistics the record reports,
// and the record's per-rank activation bytes. A backend supplies only how to run one step.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ppbench {

struct StepOutcome {
  double makespan_s = 0;       // first action start to last action end, of its trace
  std::optional<double> loss;  // when the step read it (progress lines, the last step)
  std::string note;            // for the progress line: "CUDA graph", ...
};

struct RunTimings {
  int warmup = 0, steps = 0;
  std::vector<double> makespan_s, wall_s;  // measured steps only
};

// Runs `warmup` + `steps` steps. `step(k, last)` runs step k (0-based; `last` for the final
// one, which must read the loss) and returns its outcome; the loop times its wall clock.
RunTimings run_steps(int warmup, int steps, bool progress,
                     const std::function<StepOutcome(int k, bool last)>& step);

// {"median", "min", "max"} of a measured series.
nlohmann::json spread_json(const std::vector<double>& xs);
double median_of(std::vector<double> xs);

// The record's "activation_bytes": per rank, the bytes the arena measured at action boundaries
// and the moments within an action that predicted_peak_bytes counts, and the memory model's
// prediction (and, on GPUs, the device arena's own peak).
nlohmann::json activation_bytes_json(const std::vector<double>& measured_peak,
                                     const std::vector<double>& model_peak,
                                     const std::vector<double>& device_peak = {});

// Option checks every backend makes before building anything.
void check_step_counts(int steps, int warmup);

}  // namespace ppbench
