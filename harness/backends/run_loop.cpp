#include "harness/backends/run_loop.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.h"

namespace ppbench {

RunTimings run_steps(int warmup, int steps, bool progress,
                     const std::function<StepOutcome(int, bool)>& step) {
  using Clock = std::chrono::steady_clock;
  RunTimings t;
  t.warmup = warmup;
  t.steps = steps;
  const int total = warmup + steps;
  for (int k = 0; k < total; ++k) {
    const auto began = Clock::now();
    const StepOutcome out = step(k, k + 1 == total);
    const double wall = std::chrono::duration<double>(Clock::now() - began).count();
    if (k >= warmup) {
      t.makespan_s.push_back(out.makespan_s);
      t.wall_s.push_back(wall);
    }
    if (progress) {
      std::string kind = k < warmup ? " (warm-up)" : "";
      if (!out.note.empty()) kind += " (" + out.note + ")";
      std::fprintf(stderr, "step %d/%d%s: %.4g ms compute, %.4g ms wall", k + 1, total,
                   kind.c_str(), out.makespan_s * 1e3, wall * 1e3);
      if (out.loss) std::fprintf(stderr, ", loss %.10g", *out.loss);
      std::fprintf(stderr, "\n");
    }
  }
  return t;
}

double median_of(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const std::size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

nlohmann::json spread_json(const std::vector<double>& xs) {
  if (xs.empty()) return {{"median", nullptr}, {"min", nullptr}, {"max", nullptr}};
  return {{"median", median_of(xs)},
          {"min", *std::min_element(xs.begin(), xs.end())},
          {"max", *std::max_element(xs.begin(), xs.end())}};
}

nlohmann::json activation_bytes_json(const std::vector<double>& measured_peak,
                                     const std::vector<double>& model_peak,
                                     const std::vector<double>& device_peak) {
  nlohmann::json mem = nlohmann::json::array();
  for (std::size_t k = 0; k < measured_peak.size(); ++k) {
    nlohmann::json r = {{"rank", k},
                        {"measured_peak_bytes", measured_peak[k]},
                        {"model_peak_bytes", k < model_peak.size() ? model_peak[k] : 0.0}};
    if (k < device_peak.size()) r["device_arena_peak_bytes"] = device_peak[k];
    mem.push_back(r);
  }
  return mem;
}

void check_step_counts(int steps, int warmup) {
  if (steps < 1) throw UsageError("--steps must be >= 1, got " + std::to_string(steps));
  if (warmup < 0) throw UsageError("--warmup must be >= 0, got " + std::to_string(warmup));
}

}  // namespace ppbench
