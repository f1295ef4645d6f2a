#include "harness/cuda/step_graph.h"

#include <stdexcept>
#include <vector>

#include "workloads/cuda/check.h"

namespace ppbench::cuda {

void record_timing_event(cudaEvent_t event, cudaStream_t stream, bool capturing) {
  if (capturing)
    CUDA_CHECK(cudaEventRecordWithFlags(event, stream, cudaEventRecordExternal));
  else
    CUDA_CHECK(cudaEventRecord(event, stream));
}

StepGraph::~StepGraph() {
  abandon();
  // No throw from a destructor: a graph that cannot be destroyed is leaked with its context.
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}

void StepGraph::begin(cudaStream_t compute, cudaStream_t comm, cudaEvent_t fork, cudaEvent_t join) {
  if (capturing_ || exec_) throw std::logic_error("a rank's step is captured once");
  compute_ = compute;
  comm_ = comm;
  join_ = join;
  CUDA_CHECK(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  CUDA_CHECK(cudaEventRecord(fork, compute_));
  CUDA_CHECK(cudaStreamWaitEvent(comm_, fork, 0));
}

void StepGraph::end() {
  if (!capturing_) throw std::logic_error("StepGraph::end without begin");
  try {
    CUDA_CHECK(cudaEventRecord(join_, comm_));
    CUDA_CHECK(cudaStreamWaitEvent(compute_, join_, 0));
  } catch (...) {
    // Ended here, on the thread that began it: a thread-local capture cannot be ended from
    // another thread (the destructor may run on one), and its stream stays capturing until it is.
    abandon();
    throw;
  }
  capturing_ = false;
  CUDA_CHECK(cudaStreamEndCapture(compute_, &graph_));
  std::size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CUDA_CHECK(cudaGraphGetNodes(graph_, nodes.data(), &n));
  nodes_ = n;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeEventRecord) ++event_nodes_;
  }
  CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  CUDA_CHECK(cudaGraphUpload(exec_, compute_));
}

void StepGraph::abandon() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t partial = nullptr;
  // An invalidated capture still has to be ended on its stream, or the stream stays unusable;
  // the communication stream is joined first so that a valid capture ends cleanly too.
  cudaEventRecord(join_, comm_);
  cudaStreamWaitEvent(compute_, join_, 0);
  if (cudaStreamEndCapture(compute_, &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
  cudaGetLastError();  // the capture's error was reported by the call that failed
}

void StepGraph::launch() const {
  if (!exec_) throw std::logic_error("StepGraph::launch before the step was captured");
  CUDA_CHECK(cudaGraphLaunch(exec_, compute_));
}

}  // namespace ppbench::cuda
