#include "harness/cuda/gpu_transport.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "harness/cuda/graph_record.h"
#include "harness/cuda/nccl_api.h"
#include "harness/cuda/nccl_comm.h"
#include "harness/cuda/nvtx.h"
#include "harness/cuda/step_graph.h"
#include "workloads/cuda/check.h"

namespace ppbench::cuda {

EventPool::~EventPool() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t EventPool::next() {
  if (used_ == events_.size()) {
    cudaEvent_t e{};
    CUDA_CHECK(cudaEventCreate(&e));  // timing enabled: every event may time an action
    events_.push_back(e);
  }
  return events_[used_++];
}

void EventPool::reserve(std::size_t n) {
  while (events_.size() < n) {
    cudaEvent_t e{};
    CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
}

WireDType plan_dtype(cuda::DType t) {
  switch (t) {
    case cuda::DType::kBF16:
      return WireDType::BF16;
    case cuda::DType::kF32:
      return WireDType::F32;
    case cuda::DType::kI32:
      break;
  }
  throw std::logic_error("int32 tensors never cross a stage boundary");
}

namespace {

std::string transfer_name(const P2POp& op) {
  return (op.dir == P2POp::Dir::Send ? "send " : "recv ") + to_string(op.payload) +
         (op.dir == P2POp::Dir::Send ? " ->" : " <-") + std::to_string(op.peer);
}

// ---- device-to-device copies ----------------------------------------------------------------

class CopyTransport final : public GpuTransport {
 public:
  CopyTransport(int ranks, std::optional<LinkModel> link)
      : ranks_(ranks),
        link_(link),
        channels_(static_cast<std::size_t>(ranks * ranks)),
        returns_(static_cast<std::size_t>(ranks)) {}

  std::string name() const override { return "device-to-device copies"; }

  void run_group(const RankIo& io, const std::vector<P2POp>& ops,
                 std::vector<cuda::DTensor>& tensors) override {
    if (io.capturing)
      throw std::logic_error("the copy transport cannot be captured into a CUDA graph");
    // Sends first: they never wait, so a group whose receive needs the peer's send from the
    // same group position cannot stall on this rank's own send.
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      if (op.dir != P2POp::Dir::Send) continue;
      NvtxRange range(transfer_name(op));
      cudaEvent_t produced = io.events->next();
      CUDA_CHECK(cudaEventRecord(produced, io.compute));
      Channel& ch = channel(io.rank, op.peer);
      {
        std::lock_guard lock(ch.mutex);
        ch.queue.push_back({op.tag, std::move(tensors[i]), produced});
      }
      ch.cv.notify_all();
    }
    // Before any receive blocks this thread: what it enqueues overlaps the wait for the peer.
    if (io.after_sends) io.after_sends();
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      if (op.dir != P2POp::Dir::Recv) continue;
      NvtxRange range(transfer_name(op));
      Message m = wait_for(channel(op.peer, io.rank), io.deadline, op, io.rank);
      try {
        tensors[i] = receive(io, op, m);
      } catch (...) {
        // The sender's block must go back to the sender's arena on the sender's thread, even
        // when the receive fails (DeviceArena is not thread-safe); a copy already enqueued may
        // still read it, so this rank's communication stream is drained first.
        cudaStreamSynchronize(io.comm);
        give_back(op.peer, nullptr, std::move(m.tensor));
        throw;
      }
    }
  }

  void reclaim(int rank, bool wait) override {
    Returns& r = returns_[static_cast<std::size_t>(rank)];
    std::vector<Returned> done;
    {
      std::lock_guard lock(r.mutex);
      for (auto it = r.items.begin(); it != r.items.end();) {
        // No event: handed back by a receive that failed before its copy was enqueued.
        if (wait && it->done) CUDA_CHECK(cudaEventSynchronize(it->done));
        if (wait || !it->done || cudaEventQuery(it->done) == cudaSuccess) {
          done.push_back(std::move(*it));
          it = r.items.erase(it);
        } else {
          ++it;
        }
      }
    }
    // `done` goes out of scope here, on the sender's thread: its blocks return to its arena.
  }

  void abort() override {
    aborted_ = true;
    for (Channel& c : channels_) {
      std::lock_guard lock(c.mutex);
      c.cv.notify_all();
    }
  }

  void begin_step() override { aborted_ = false; }

  bool capturable(std::string* why) const override {
    if (ranks_ == 1) return true;  // nothing crosses ranks: no transfer is ever captured
    if (why) *why = kCudaGraphNeedsGpus;
    return false;
  }

  void release_sent(int) override {}  // never captured: reclaim() releases every sent tensor

 private:
  struct Message {
    std::uint64_t tag = 0;
    cuda::DTensor tensor;
    cudaEvent_t produced = nullptr;
  };
  struct Channel {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Message> queue;
  };
  struct Returned {
    cudaEvent_t done;
    cuda::DTensor tensor;
  };
  struct Returns {
    std::mutex mutex;
    std::deque<Returned> items;
  };

  Channel& channel(int src, int dst) {
    return channels_[static_cast<std::size_t>(src * ranks_ + dst)];
  }

  // Copies a received message into a block of this rank's arena on its communication stream;
  // the sender's block is handed back once the copy's `end` event has fired.
  cuda::DTensor receive(const RankIo& io, const P2POp& op, Message& m) {
    if (m.tag != op.tag)
      throw std::logic_error("rank " + std::to_string(io.rank) + " expected " +
                             to_string(op.payload) + " from rank " + std::to_string(op.peer) +
                             " but the next message there has another tag: the plan and the " +
                             "executor disagree");
    // The transfer starts once the sender has produced the tensor. Under a link model it then
    // takes the link's time while this rank may still be computing, as a real link would; the
    // copy into this rank's arena waits for this rank's compute so far as well (the receive
    // buffer may reuse a block that compute kernels enqueued earlier still read). The transfer
    // is timed from the sender's data to its arrival: the link's time, or the copy's.
    CUDA_CHECK(cudaStreamWaitEvent(io.comm, m.produced, 0));
    cudaEvent_t begin = io.events->next(), end = io.events->next(), arrived = end;
    if (link_) {
      arrived = io.events->next();
      CUDA_CHECK(cudaEventRecord(begin, io.comm));
      enqueue_delay(io.comm, link_->transfer_seconds(static_cast<std::size_t>(m.tensor.bytes())));
      CUDA_CHECK(cudaEventRecord(arrived, io.comm));
    }
    cudaEvent_t here = io.events->next();
    CUDA_CHECK(cudaEventRecord(here, io.compute));
    CUDA_CHECK(cudaStreamWaitEvent(io.comm, here, 0));
    if (!link_) CUDA_CHECK(cudaEventRecord(begin, io.comm));
    cuda::DTensor dst(*io.arena, m.tensor.shape(), m.tensor.dtype(), "received tensor");
    // cudaMemcpyDefault: both buffers are device memory of one GPU in different (green)
    // contexts; unified addressing resolves them.
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), m.tensor.data(),
                               static_cast<std::size_t>(m.tensor.bytes()), cudaMemcpyDefault,
                               io.comm));
    CUDA_CHECK(cudaEventRecord(end, io.comm));
    CUDA_CHECK(cudaStreamWaitEvent(io.compute, end, 0));
    io.timings->push_back({op.peer, io.rank, io.rank, begin, arrived, op.payload});
    io.pending->push_back({end, op.instr, op.peer, false});
    give_back(op.peer, end, std::move(m.tensor));
    return dst;
  }

  void give_back(int sender, cudaEvent_t done, cuda::DTensor tensor) {
    std::lock_guard lock(returns_[static_cast<std::size_t>(sender)].mutex);
    returns_[static_cast<std::size_t>(sender)].items.push_back({done, std::move(tensor)});
  }

  Message wait_for(Channel& ch, Clock::time_point deadline, const P2POp& op, int rank) {
    std::unique_lock lock(ch.mutex);
    if (!ch.cv.wait_until(lock, deadline, [&] { return aborted_ || !ch.queue.empty(); }))
      throw TransportTimeout(op.instr, op.peer,
                             "nothing arrives from rank " + std::to_string(op.peer));
    if (ch.queue.empty()) throw TransportAborted();
    (void)rank;
    Message m = std::move(ch.queue.front());
    ch.queue.pop_front();
    return m;
  }

  int ranks_;
  std::optional<LinkModel> link_;
  std::vector<Channel> channels_;
  std::vector<Returns> returns_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::shared_ptr<GpuTransport> make_copy_transport(int ranks, std::optional<LinkModel> link) {
  return std::make_unique<CopyTransport>(ranks, link);
}

// ---- NCCL ------------------------------------------------------------------------------------

#if PPBENCH_HAVE_NCCL_H

ncclDataType_t nccl_type(WireDType t) {
  switch (t) {
    case WireDType::F32:
      return ncclFloat32;
    case WireDType::BF16:
      return ncclBfloat16;
    case WireDType::F16:
      return ncclFloat16;
    case WireDType::F64:
      return ncclFloat64;
  }
  return ncclFloat32;
}

namespace {

#define NCCL_CHECK(call) nccl_check((call), #call)

class NcclTransport final : public GpuTransport {
 public:
  explicit NcclTransport(const std::vector<int>& devices)
      : devices_(devices),
        comms_(devices.size()),
        locks_(devices.size()),
        in_flight_(devices.size()) {
    NCCL_CHECK(nccl().CommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data()));
  }
  // One rank of a communicator made by every process of the pipeline (nccl_comm.h); the other
  // ranks' entries stay empty, their groups are posted by their own processes.
  NcclTransport(ncclComm_t comm, int rank, int ranks)
      : comms_(static_cast<std::size_t>(ranks)),
        locks_(static_cast<std::size_t>(ranks)),
        in_flight_(static_cast<std::size_t>(ranks)) {
    comms_.at(static_cast<std::size_t>(rank)) = comm;
  }
  ~NcclTransport() override {
    for (ncclComm_t c : comms_) release_comm(c, aborted_);
  }

  std::string name() const override { return "NCCL point-to-point"; }

  void run_group(const RankIo& io, const std::vector<P2POp>& ops,
                 std::vector<cuda::DTensor>& tensors) override {
    std::string label = "group";
    for (const P2POp& op : ops) label += " " + transfer_name(op);
    NvtxRange range(label);
    cudaEvent_t here = io.events->next();
    CUDA_CHECK(cudaEventRecord(here, io.compute));
    CUDA_CHECK(cudaStreamWaitEvent(io.comm, here, 0));
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].dir == P2POp::Dir::Recv)
        tensors[i] =
            cuda::DTensor(*io.arena, io.shape_of(ops[i].payload), io.dtype, "received tensor");
    bool receives = false;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      // Checked before the group opens: a throw inside it would leave it open on this thread.
      if (static_cast<std::size_t>(tensors[i].bytes()) != ops[i].bytes)
        throw std::logic_error("rank " + std::to_string(io.rank) + ": " + to_string(ops[i]) +
                               " but the tensor holds " + std::to_string(tensors[i].bytes()) +
                               " B");
      receives = receives || ops[i].dir == P2POp::Dir::Recv;
    }
    cudaEvent_t begin = io.events->next(), end = io.events->next();
    record_timing_event(begin, io.comm, io.capturing);
    if (io.capturing) captured_ = true;
    {
      // NCCL takes one thread at a time on a communicator: abort() waits for this group.
      std::lock_guard<std::timed_mutex> hold(locks_[static_cast<std::size_t>(io.rank)]);
      if (aborted_)
        throw CudaError("rank " + std::to_string(io.rank) +
                        ": NCCL communicator aborted after another rank failed");
      post_group(comms_[static_cast<std::size_t>(io.rank)], io, ops, tensors);
    }
    record_timing_event(end, io.comm, io.capturing);
    // On the compute stream after `here`: the group does not wait for it, and it runs while the
    // group's receives are on their way.
    if (io.after_sends) io.after_sends();
    // A group that only sends does not order the compute stream: its tensors are held until
    // `end` (in flight, below). A group that also receives does, on `end`: NCCL completes a
    // group as one, so there the compute stream waits for the group's sends as well.
    if (receives) {
      // In a capture the timing event is a graph node and cannot also order the streams.
      cudaEvent_t arrived = end;
      if (io.capturing) {
        arrived = io.events->next();
        CUDA_CHECK(cudaEventRecord(arrived, io.comm));
      }
      CUDA_CHECK(cudaStreamWaitEvent(io.compute, arrived, 0));
    }
    auto& flight = in_flight_[static_cast<std::size_t>(io.rank)];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      if (!io.capturing)
        io.pending->push_back({end, op.instr, op.peer, op.dir == P2POp::Dir::Send});
      if (op.dir == P2POp::Dir::Send) {
        // The group is timed on the sender: NCCL runs its ops together, so each send of the
        // group gets the group's span.
        io.timings->push_back({io.rank, op.peer, io.rank, begin, end, op.payload});
        flight.push_back({end, std::move(tensors[i])});
      }
    }
  }

  void reclaim(int rank, bool wait) override {
    auto& flight = in_flight_[static_cast<std::size_t>(rank)];
    for (auto it = flight.begin(); it != flight.end();) {
      if (wait) CUDA_CHECK(cudaEventSynchronize(it->first));
      if (wait || cudaEventQuery(it->first) == cudaSuccess)
        it = flight.erase(it);
      else
        ++it;
    }
  }

  bool capturable(std::string* why) const override {
    int v = 0;
    if (nccl().GetVersion(&v) == ncclSuccess && v >= 20900) return true;
    if (why)
      *why =
          "--cuda-graph needs NCCL 2.9 or newer to capture point-to-point calls; this build "
          "runs NCCL " +
          nccl_version_text() + " (run without --cuda-graph)";
    return false;
  }

  void release_sent(int rank) override { in_flight_[static_cast<std::size_t>(rank)].clear(); }

  // One element over each link, in one group posted for every rank from this thread (NCCL's way
  // of driving several GPUs from one thread), so that no step's group is the first to use a
  // pair. Only the communicator of one process has every rank's side here; across processes a
  // rank that fails ends the job (MPI_Abort), so no thread waits for it.
  void connect(const std::vector<std::pair<int, int>>& links) override {
    if (devices_.empty() || links.empty()) return;
    struct Side {
      float* buffer = nullptr;  // [0] is sent, [1 + peer] receives from peer
      cudaStream_t stream = nullptr;
    };
    std::vector<Side> sides(devices_.size());
    bool posted = false;  // sends or receives may be in flight on the sides' streams
    const auto release = [&] {
      for (std::size_t r = 0; r < sides.size(); ++r) {
        if (sides[r].buffer == nullptr && sides[r].stream == nullptr) continue;
        cudaSetDevice(devices_[r]);
        if (sides[r].stream) cudaStreamDestroy(sides[r].stream);
        if (sides[r].buffer) cudaFree(sides[r].buffer);
      }
    };
    try {
      for (std::size_t r = 0; r < sides.size(); ++r) {
        CUDA_CHECK(cudaSetDevice(devices_[r]));
        CUDA_CHECK(cudaMalloc(&sides[r].buffer, (sides.size() + 1) * sizeof(float)));
        CUDA_CHECK(cudaStreamCreateWithFlags(&sides[r].stream, cudaStreamNonBlocking));
        // On the stream the sends use: a non-blocking stream is not ordered after the legacy
        // default one.
        CUDA_CHECK(cudaMemsetAsync(sides[r].buffer, 0, (sides.size() + 1) * sizeof(float),
                                   sides[r].stream));
      }
      posted = true;
      nccl_group([&] {
        for (const auto& [src, dst] : links) {
          const Side& from = sides.at(static_cast<std::size_t>(src));
          const Side& to = sides.at(static_cast<std::size_t>(dst));
          NCCL_CHECK(nccl().Send(from.buffer, 1, ncclFloat32, dst,
                                 comms_[static_cast<std::size_t>(src)], from.stream));
          NCCL_CHECK(nccl().Recv(to.buffer + 1 + src, 1, ncclFloat32, src,
                                 comms_[static_cast<std::size_t>(dst)], to.stream));
        }
      });
      for (std::size_t r = 0; r < sides.size(); ++r) {
        CUDA_CHECK(cudaSetDevice(devices_[r]));
        CUDA_CHECK(cudaStreamSynchronize(sides[r].stream));
      }
    } catch (...) {
      // A receive whose send NCCL refused waits for ever, and cudaFree waits for the device:
      // aborting the communicators first makes their kernels return. The run fails either way.
      if (posted) abort();
      release();
      throw;
    }
    release();
  }

  void abort() override {
    // A rank stuck in a transfer that will never complete: aborting the communicators makes
    // its kernels return, so the step can end with the watchdog's error. The thread that fails
    // first calls this while other ranks may be posting groups: each communicator is aborted
    // once its rank is outside NCCL. A rank whose thread stays inside NCCL for seconds keeps its
    // communicator (aborting it under that thread would free what the thread uses); the run is
    // failing and the destructor or the process's end takes it.
    if (aborted_.exchange(true)) return;
    // Once a group was captured, ncclCommAbort waits until every graph holding work of the
    // communicator is destroyed (NCCL 2.26 and newer), and the executor destroys its graphs
    // only after this rank thread has returned: aborting here would wait for ever. A replay's
    // wait still ends at the watchdog's limit, and the destructor aborts the communicators
    // after the executor's graphs are gone, which also stops NCCL kernels still running.
    if (captured_) return;
    for (std::size_t r = 0; r < comms_.size(); ++r) {
      std::unique_lock<std::timed_mutex> hold(locks_[r], std::defer_lock);
      if (!hold.try_lock_for(std::chrono::seconds(2))) continue;
      if (comms_[r]) nccl().CommAbort(comms_[r]);  // a rank of another process has none here
      comms_[r] = nullptr;
    }
  }

 private:
  // The group's sends and receives between GroupStart and GroupEnd; a failure inside closes the
  // group before it is reported.
  static void post_group(ncclComm_t comm, const RankIo& io, const std::vector<P2POp>& ops,
                         std::vector<cuda::DTensor>& tensors) {
    nccl_group([&] {
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const P2POp& op = ops[i];
        if (op.dir == P2POp::Dir::Send)
          NCCL_CHECK(nccl().Send(tensors[i].data(), op.count, nccl_type(op.dtype), op.peer, comm,
                                 io.comm));
        else
          NCCL_CHECK(nccl().Recv(tensors[i].data(), op.count, nccl_type(op.dtype), op.peer, comm,
                                 io.comm));
      }
    });
  }

  std::vector<int> devices_;  // one per rank where this process holds every rank (else empty)
  std::vector<ncclComm_t> comms_;
  std::vector<std::timed_mutex> locks_;  // per rank: held while its group is posted
  std::vector<std::deque<std::pair<cudaEvent_t, cuda::DTensor>>> in_flight_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> captured_{false};  // a group went into a CUDA graph
};

}  // namespace

#endif

std::shared_ptr<GpuTransport> make_nccl_transport(const std::vector<int>& devices) {
  std::set<int> seen;
  for (int d : devices)
    if (!seen.insert(d).second)
      throw UsageError("NCCL cannot run two ranks on one GPU (GPU " + std::to_string(d) +
                       " listed twice); use --virtual-devices to split one GPU");
#if PPBENCH_HAVE_NCCL_H
  return std::make_unique<NcclTransport>(devices);
#else
  throw EnvironmentError(
      "this build has no NCCL (nccl.h was not found by CMake); --gpus with more "
      "than one GPU needs it, one GPU and --virtual-devices do not");
#endif
}

}  // namespace ppbench::cuda

namespace ppbench::cuda {
std::string transport_name(const GpuTransport& t) { return t.name(); }
#if PPBENCH_HAVE_NCCL_H
std::shared_ptr<GpuTransport> make_nccl_rank_transport(ncclComm_t comm, int rank, int ranks) {
  return std::make_shared<NcclTransport>(comm, rank, ranks);
}
#endif
}  // namespace ppbench::cuda
