// What a run's record says about `--cuda-graph` (`gpu.cuda_graph`), and the host-side rules of
// graph mode that need no GPU: how many eager steps come before the capture, and the step time
// of a replay from each rank's launch and completion.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ppbench::cuda {

// Steps run eagerly before the capture: the warm-up, and at least one. The eager step loads
// every kernel's module (lazy loading may synchronise a context, which a capture forbids),
// fills the GEMM algorithm cache, and makes NCCL connect its peers (NCCL's guide: capturing
// point-to-point calls with none before them needs the relaxed capture mode).
int eager_steps_before_capture(int warmup);

// Where the per-action timings of a replayed step come from.
enum class GraphTiming {
  kEventNodes,  // event-record nodes in the graph, as eager steps time actions
  kEagerTrace,  // cudaEventElapsedTime refused them: the trace is the last eager step's, and
                // only the step's total time comes from the replays
};

struct CudaGraphSummary {
  bool enabled = false;
  int eager_steps = 0;
  std::vector<double> capture_seconds;          // per rank: capture + instantiate + upload (host)
  std::vector<std::size_t> nodes;               // per rank: nodes of its graph
  std::vector<std::size_t> event_record_nodes;  // per rank: of which timing events
  GraphTiming timing = GraphTiming::kEventNodes;
  std::vector<double> launch_to_done_s;  // per rank, the last replay: launch to completion
};

// {"enabled": false} or every field above, named for a reader of the JSON.
nlohmann::json to_json(const CudaGraphSummary& s);

// First launch to last completion over the ranks, with each rank's launch on the common host
// clock (trace_align.h) and its duration from its own events. Throws std::invalid_argument when
// the vectors differ in size, are empty, or hold a negative or non-finite value.
double graph_step_seconds(const std::vector<double>& launch_host_seconds,
                          const std::vector<double>& launch_to_done_s);

std::string timing_source_text(GraphTiming t);

// The one-line refusal of --cuda-graph with --virtual-devices (the reason: gpu_transport.h).
extern const char* const kCudaGraphNeedsGpus;

}  // namespace ppbench::cuda
