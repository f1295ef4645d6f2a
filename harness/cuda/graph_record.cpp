#include "harness/cuda/graph_record.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ppbench::cuda {

const char* const kCudaGraphNeedsGpus =
    "--cuda-graph needs --gpus (NCCL) or a single rank: with --virtual-devices 2 or more each "
    "rank's graph would wait on "
    "another's through stream memory operations, an order CUDA cannot see and that may deadlock "
    "(run --virtual-devices without --cuda-graph)";

int eager_steps_before_capture(int warmup) { return std::max(warmup, 1); }

std::string timing_source_text(GraphTiming t) {
  switch (t) {
    case GraphTiming::kEventNodes:
      return "graph event-record nodes";
    case GraphTiming::kEagerTrace:
      return "last eager step (cudaEventElapsedTime refused graph-recorded events; step time "
             "from the replays)";
  }
  return "?";
}

nlohmann::json to_json(const CudaGraphSummary& s) {
  if (!s.enabled) return {{"enabled", false}};
  return {{"enabled", true},
          {"eager_steps_before_capture", s.eager_steps},
          {"capture_seconds_per_rank", s.capture_seconds},
          {"nodes_per_rank", s.nodes},
          {"event_record_nodes_per_rank", s.event_record_nodes},
          {"per_action_timings_from_graph", s.timing == GraphTiming::kEventNodes},
          {"per_action_timing_source", timing_source_text(s.timing)},
          {"launch_to_done_seconds_per_rank", s.launch_to_done_s}};
}

double graph_step_seconds(const std::vector<double>& launch_host_seconds,
                          const std::vector<double>& launch_to_done_s) {
  if (launch_host_seconds.empty() || launch_host_seconds.size() != launch_to_done_s.size())
    throw std::invalid_argument("graph step time: " + std::to_string(launch_host_seconds.size()) +
                                " launches but " + std::to_string(launch_to_done_s.size()) +
                                " durations");
  for (std::size_t r = 0; r < launch_host_seconds.size(); ++r)
    if (!std::isfinite(launch_host_seconds[r]) || !std::isfinite(launch_to_done_s[r]) ||
        launch_to_done_s[r] < 0)
      throw std::invalid_argument("graph step time: rank " + std::to_string(r) +
                                  " has a launch or a duration that is not a time");
  const double first = *std::min_element(launch_host_seconds.begin(), launch_host_seconds.end());
  double last = first;
  for (std::size_t r = 0; r < launch_host_seconds.size(); ++r)
    last = std::max(last, launch_host_seconds[r] + launch_to_done_s[r]);
  return last - first;
}

}  // namespace ppbench::cuda
