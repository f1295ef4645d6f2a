// How tensors cross ranks in the GPU executor, behind one small interface with two
// implementations:
//   NcclTransport  `--gpus`: one NCCL communicator, rank = GPU; each group of the NCCL plan is
//                  posted as ncclGroupStart / ncclSend / ncclRecv / ncclGroupEnd on the rank's
//                  communication stream, so a rank's sends and receives progress together.
//   CopyTransport  `--virtual-devices`: partitions of one GPU; the receiver copies the sender's
//                  buffer device-to-device on its own communication stream once the producer's
//                  event has fired, delayed to the emulated link's time when a LinkModel is set.
//
// Both are driven by the same NcclPlan (its groups and its matched receive order), so the two
// placements replay one proven-deadlock-free order. Buffers: a received tensor is allocated
// from the receiver's arena; a sent tensor stays referenced until its transfer's event has
// completed, and is released on the SENDER's thread (DeviceArena is not thread-safe).
//
// CUDA graphs (`--cuda-graph`, step_graph.h): only NcclTransport can be captured. NCCL
// point-to-point calls are capturable (NCCL >= 2.9) and NCCL synchronises the peers on the
// devices, so each rank's graph stands alone. The copy transport learns its sender's buffer and
// event on the host; across two separately launched graphs that order could only be kept by
// stream memory operations (cuStreamWaitValue32 / cuStreamWriteValue32), whose ordering CUDA
// cannot see and which the driver's own documentation warns may deadlock when the scheduler
// serialises the graphs in another order, so it refuses (capturable() says why). While a
// group is captured (RankIo::capturing) the timing events become event-record nodes, a
// separate event carries the cross-stream wait, no transfer is left for the watchdog (the host
// cannot observe one inside a graph), and every sent tensor stays referenced until the executor
// calls release_sent() after the capture: its block is never reused within the step, whatever
// the timing of a replay.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "harness/cuda/link_delay.h"
#include "harness/cuda/link_model.h"
#include "harness/cuda/nccl_api.h"
#include "harness/cuda/nccl_plan.h"
#include "harness/cuda/transport_factory.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

using Clock = std::chrono::steady_clock;

// Events handed out in order during a step and reused by the next (creating events costs
// microseconds; a step needs a few per action). Only the owning rank's thread touches a pool.
class EventPool {
 public:
  EventPool() = default;
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  cudaEvent_t next();
  void reset() { used_ = 0; }
  // Creates events until `n` exist, so that a capture hands out only existing ones (creating
  // an event is not a call to make while a stream of this thread is being captured).
  void reserve(std::size_t n);

 private:
  std::vector<cudaEvent_t> events_;
  std::size_t used_ = 0;
};

// A transfer timed by events on the rank that ran it (see trace_align.h: timed_on).
struct TransferTiming {
  int src = 0, dst = 0, timed_on = 0;
  cudaEvent_t begin = nullptr, end = nullptr;
  Task task;
};

// A transfer not yet known to be complete, for the watchdog: its done event and the lowered
// instruction it comes from.
struct PendingTransfer {
  cudaEvent_t done = nullptr;
  std::size_t instr = 0;
  int peer = 0;
  bool send = false;
};

// What one rank's thread hands the transport for a group.
struct RankIo {
  int rank = 0;
  cudaStream_t compute = nullptr, comm = nullptr;
  cuda::DeviceArena* arena = nullptr;
  EventPool* events = nullptr;
  std::vector<TransferTiming>* timings = nullptr;
  std::vector<PendingTransfer>* pending = nullptr;
  Clock::time_point deadline;  // the watchdog's limit for host-side waits in this group
  // Shape of the tensor a payload carries (F: the stage's output; B/I: its input).
  std::function<cuda::Shape(const Task&)> shape_of;
  cuda::DType dtype = cuda::DType::kF32;
  bool capturing = false;  // the streams are being captured into the rank's CUDA graph
  // Called once per group, after its sends are posted (the comm stream already ordered after
  // the compute stream's work so far) and before this rank waits for, or orders its compute
  // stream after, any of its receives: the executor enqueues a finished stage's optimizer update
  // here, so that it neither holds up the gradient's send nor waits for the next input, as the
  // CPU executor and the simulator run it.
  std::function<void()> after_sends;
};

// Thrown out of a wait that abort() ended: another rank failed first, and its error is the
// step's; this rank stops quietly.
class TransportAborted : public std::exception {
 public:
  const char* what() const noexcept override { return "the step was aborted by another rank"; }
};

// Thrown when a wait passes the watchdog's limit; the executor names the rank and instruction.
class TransportTimeout : public std::runtime_error {
 public:
  TransportTimeout(std::size_t at, int from, const std::string& what)
      : std::runtime_error(what), instr(at), peer(from) {}
  std::size_t instr;
  int peer;
};

class GpuTransport {
 public:
  virtual ~GpuTransport() = default;
  virtual std::string name() const = 0;
  // Posts one group of rank io.rank's ops. `tensors[i]` holds the tensor of a send (the comm
  // stream is ordered after everything enqueued on the compute stream so far); a receive's
  // entry is filled, and the compute stream is made to wait for its arrival. Calls
  // io.after_sends, where set, exactly once, between the two.
  virtual void run_group(const RankIo& io, const std::vector<P2POp>& ops,
                         std::vector<cuda::DTensor>& tensors) = 0;
  // Releases sent tensors whose transfers completed; with `wait`, waits for all of them.
  virtual void reclaim(int rank, bool wait) = 0;
  // Makes every blocked host wait return (another rank failed).
  virtual void abort() = 0;
  // Sets up, before the first step, every (sender, receiver) link a step sends over (send_links
  // of its plan), on the constructing thread with no rank thread running. A transport that
  // connects a pair lazily, inside the first group that uses it, blocks that group's thread
  // until the peer posts its own side: a peer that failed first would leave it there, out of
  // abort()'s reach.
  virtual void connect(const std::vector<std::pair<int, int>>& links) { (void)links; }
  virtual void begin_step() {}
  // Whether a rank's groups can be captured into a CUDA graph; if not, `why` says why in one
  // line naming the flag to use instead.
  virtual bool capturable(std::string* why) const = 0;
  // Drops every sent tensor still held for `rank` without waiting for its transfer: only after
  // a capture, when nothing captured has run and the blocks stay untouched between replays.
  virtual void release_sent(int rank) = 0;
};

// The nccl_plan dtype of a layer dtype (ids never cross a stage boundary).
WireDType plan_dtype(cuda::DType t);
#if PPBENCH_HAVE_NCCL_H
// NCCL's element type of a plan dtype.
ncclDataType_t nccl_type(WireDType t);
#endif

}  // namespace ppbench::cuda
