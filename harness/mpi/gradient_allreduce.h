// Data parallelism beside the pipeline: after a stage's last backward, its gradients are summed
// across the R replicas that hold it (MPI_Allreduce on the stage's data communicator), as
// Megatron-LM and DeepSpeed do, so that every replica ends the step with the gradients of all
// R * N micro-batches.
//
//   end of step (default): one all-reduce of all the rank's gradients after its last action;
//   overlapped (--dp-overlap): each stage's all-reduce starts (MPI_Iallreduce) as soon as that
//     stage's last backward ends, and advances while the rank goes on with other stages' work
//     (MPI progresses inside calls: the executor polls after every action).
//
// Each all-reduce is a CollectiveEvent on the rank's trace: issued at `start`, seen complete at
// `end` (for an overlapped one, at the first poll that finds it done).
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include <mpi.h>

#include "harness/mpi/mpi_session.h"
#include "harness/mpi/mpi_types.h"
#include "harness/trace.h"
#include "workloads/cpu/tensor.h"

namespace ppbench::mpi {

template <typename T>
class GradientAllReduce {
 public:
  struct StageGradients {
    int stage = 0;
    std::vector<cpu::Param<T>*> params;
  };

  GradientAllReduce(MPI_Comm data, int rank, bool overlap, std::vector<StageGradients> stages)
      : comm_(data), rank_(rank), overlap_(overlap) {
    for (auto& s : stages) stages_.push_back({std::move(s), {}, {}, -1});
  }
  // After a failure an overlapped all-reduce may still be in flight on a stage's buffer, and MPI
  // may write into it until MPI_Abort ends the job, which comes after this object is gone: the
  // buffers are then left to the process's end rather than freed under MPI.
  ~GradientAllReduce() {
    for (const Stage& s : stages_)
      if (!s.requests.empty()) {
        new std::vector<Stage>(std::move(stages_));  // leaked on purpose
        return;
      }
  }
  GradientAllReduce(const GradientAllReduce&) = delete;
  GradientAllReduce& operator=(const GradientAllReduce&) = delete;

  // The step's clock (seconds on the shared timeline) for the events.
  void set_clock(std::function<double()> now) { now_ = std::move(now); }

  // Overlapped: `stage` has finished its backward on this rank.
  void stage_done(int stage) {
    if (!overlap_) return;
    for (Stage& s : stages_)
      if (s.grads.stage == stage) start(s);
  }

  // Overlapped: advances what is in flight and notes the ones that completed.
  void poll() {
    for (Stage& s : stages_) {
      if (s.event < 0 || s.requests.empty()) continue;
      int done = 0;
      check(MPI_Testall(static_cast<int>(s.requests.size()), s.requests.data(), &done,
                        MPI_STATUSES_IGNORE),
            "MPI_Testall (gradient all-reduce)");
      if (done != 0) complete(s);
    }
  }

  // After the rank's last action: the end-of-step all-reduce, or the rest of the overlapped
  // ones; then every stage's gradients hold the sum over the replicas. Returns the step's events.
  std::vector<CollectiveEvent> finish() {
    if (!overlap_) {
      const double begin = now_();
      std::vector<T> all;
      for (Stage& s : stages_) pack(s, all);
      reduce_blocking(all);
      std::size_t at = 0;
      for (Stage& s : stages_) at = unpack(s, all, at);
      events_.push_back({rank_, begin, now_(), -1, static_cast<double>(all.size() * sizeof(T))});
    } else {
      for (Stage& s : stages_) {
        if (s.event < 0) start(s);  // a stage without a backward on this rank (none today)
        check(MPI_Waitall(static_cast<int>(s.requests.size()), s.requests.data(),
                          MPI_STATUSES_IGNORE),
              "MPI_Waitall (gradient all-reduce)");
        if (!s.requests.empty()) complete(s);
        unpack(s, s.buffer, 0);
      }
    }
    std::vector<CollectiveEvent> out = std::move(events_);
    events_.clear();
    for (Stage& s : stages_) s.event = -1;
    return out;
  }

 private:
  struct Stage {
    StageGradients grads;
    std::vector<T> buffer;
    std::vector<MPI_Request> requests;
    int event;  // index in events_ of the all-reduce in flight, -1 before it starts
  };

  static void pack(const Stage& s, std::vector<T>& out) {
    for (const cpu::Param<T>* p : s.grads.params)
      out.insert(out.end(), p->grad.data.begin(), p->grad.data.end());
  }
  static std::size_t unpack(Stage& s, const std::vector<T>& in, std::size_t at) {
    for (cpu::Param<T>* p : s.grads.params) {
      std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(at), p->grad.data.size(),
                  p->grad.data.begin());
      at += p->grad.data.size();
    }
    return at;
  }

  void reduce_blocking(std::vector<T>& all) const {
    in_pieces(all.size(), [&](std::size_t at, int n) {
      check(MPI_Allreduce(MPI_IN_PLACE, all.data() + at, n, mpi_type<T>(), MPI_SUM, comm_),
            "MPI_Allreduce (gradients)");
    });
  }

  void start(Stage& s) {
    s.buffer.clear();
    pack(s, s.buffer);
    s.event = static_cast<int>(events_.size());
    events_.push_back(
        {rank_, now_(), 0, s.grads.stage, static_cast<double>(s.buffer.size() * sizeof(T))});
    s.requests.clear();
    if (s.buffer.empty()) return complete(s);  // a stage without parameters
    in_pieces(s.buffer.size(), [&](std::size_t at, int n) {
      s.requests.push_back(MPI_REQUEST_NULL);
      check(MPI_Iallreduce(MPI_IN_PLACE, s.buffer.data() + at, n, mpi_type<T>(), MPI_SUM, comm_,
                           &s.requests.back()),
            "MPI_Iallreduce (gradients)");
    });
  }

  void complete(Stage& s) {
    events_[static_cast<std::size_t>(s.event)].end = now_();
    s.requests.clear();
  }

  MPI_Comm comm_;
  int rank_;
  bool overlap_;
  std::vector<Stage> stages_;
  std::vector<CollectiveEvent> events_;
  std::function<double()> now_ = [] { return 0.0; };
};

}  // namespace ppbench::mpi
