// One rank's training step captured as a CUDA graph (`ppbench run --cuda-graph`), and the event
// records that time it.
//
// Capture: cudaStreamBeginCapture on the rank's compute stream in cudaStreamCaptureModeThreadLocal
// mode (every rank's thread captures at once, and NCCL asks for that mode when one process drives
// several GPUs from several threads); the communication stream is forked into the capture by an
// event recorded on the compute stream and joined back by one recorded on the communication
// stream before the capture ends, so one launch on the compute stream runs both and completes
// when both have. Nothing captured runs until the graph is launched.
//
// Timing: inside a capture a plain cudaEventRecord only expresses a dependency between captured
// streams; the event itself is never recorded at replay and cannot be timed (CUDA's "internal"
// events). An event recorded with cudaEventRecordExternal becomes an event-record node that
// records the event at every launch, and cudaEventElapsedTime works on it once the launch has
// completed (what PyTorch's external timing events and Warp's graph timing events rely on).
// record_timing_event picks the flag; an event used for timing is never also used for a
// cross-stream wait inside a capture (CUDA advises against mixing the two roles).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace ppbench::cuda {

// Records `event` on `stream` so that it can be timed: an event-record node when `capturing`.
void record_timing_event(cudaEvent_t event, cudaStream_t stream, bool capturing);

class StepGraph {
 public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Starts capturing `compute` and forks `comm` into the capture with `fork`; `join` will join
  // it back (two events not otherwise in use). Must be called, and end() or abandon() later, on
  // the same thread with the rank's context current.
  void begin(cudaStream_t compute, cudaStream_t comm, cudaEvent_t fork, cudaEvent_t join);
  // Joins `comm` back, ends the capture, instantiates the graph and uploads it to the device
  // (so the first launch is not slower than the next). Throws cuda::CudaError naming the call
  // when the capture was invalidated (a non-capturable call on this thread).
  void end();
  // Ends a capture that failed halfway, discarding what was captured; never throws.
  void abandon() noexcept;

  // Enqueues one replay of the step on the compute stream.
  void launch() const;

  bool ready() const { return exec_ != nullptr; }
  std::size_t nodes() const { return nodes_; }                     // every node of the graph
  std::size_t event_record_nodes() const { return event_nodes_; }  // timing events among them

 private:
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaEvent_t join_ = nullptr;
  bool capturing_ = false;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::size_t nodes_ = 0, event_nodes_ = 0;
};

}  // namespace ppbench::cuda
