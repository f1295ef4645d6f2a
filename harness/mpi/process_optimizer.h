// The optimizer step of one process of a multi-process run, after the data-parallel all-reduce:
// each stage the process holds is updated from its gradients summed over every copy of its part
// (Chimera and DualPipe keep two copies, on two pipeline ranks: the twin's gradients come over
// MPI_Sendrecv), so that every copy and every replica applies the same update.
//
// Pairs exchange in ascending part order on every process, so no two processes wait on each
// other in a cycle.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include <mpi.h>

#include "core/cpu_cores.h"
#include "harness/backends/cpu/part_optimizer.h"
#include "harness/backends/step_values.h"
#include "harness/mpi/mpi_session.h"
#include "harness/mpi/mpi_types.h"
#include "harness/trace.h"
#include "schedules/placement.h"

namespace ppbench::mpi {

template <typename T>
class ProcessOptimizer {
 public:
  // `stages`: the process's stages with their parameters (params_by_layer(), in stage order,
  // `stage_ids` the matching stage ids); `pipeline`: the replica's communicator.
  ProcessOptimizer(const OptimizerOptions& o, const Placement& p, int me,
                   const std::vector<StageParams<cpu::Param<T>>>& stages,
                   const std::vector<int>& stage_ids, MPI_Comm pipeline)
      : me_(me) {
    check(MPI_Comm_dup(pipeline, &comm_), "MPI_Comm_dup (optimizer)");
    std::map<int, Part> parts;  // ascending part order
    for (std::size_t k = 0; k < stages.size(); ++k) {
      Part& part = parts[stages[k].part];
      part.part = stages[k].part;
      if (part.stage < 0) part.stage = stage_ids.at(k);
      part.copies.push_back(all_params(stages[k]));
    }
    for (auto& [id, part] : parts) {
      part.twin = p.twin_rank(part.stage);
      part.optimizer = std::make_unique<cpu::PartOptimizer<T>>(o, part.copies);
      parts_.push_back(std::move(part));
    }
  }
  ~ProcessOptimizer() {
    if (World::started()) MPI_Comm_free(&comm_);
  }
  ProcessOptimizer(const ProcessOptimizer&) = delete;
  ProcessOptimizer& operator=(const ProcessOptimizer&) = delete;

  // The bytes of the optimizer states this process keeps.
  double state_bytes() const {
    double b = 0;
    for (const Part& part : parts_)
      for (std::size_t c = 0; c < part.optimizer->copies(); ++c)
        b += static_cast<double>(part.optimizer->state_bytes(c));
    return b;
  }

  // Updates every stage; returns the updates, timed on `now`, with their CPU time where
  // `cpu_time` (processes sharing cores, core/cpu_cores.h).
  std::vector<UpdateEvent> step(const std::function<double()>& now, bool cpu_time = false) {
    std::vector<UpdateEvent> events;
    for (Part& part : parts_) {
      const ThreadCpuTimer cpu(cpu_time);
      const double begin = now();
      if (part.twin < 0) {
        part.optimizer->step();
      } else {
        exchange(part);
        part.optimizer->step(&remote_);
      }
      events.push_back({me_, begin, now(), part.stage, cpu.seconds()});
    }
    return events;
  }

 private:
  struct Part {
    int part = 0, stage = -1, twin = -1;  // twin: the pipeline rank with the other copy
    std::vector<std::vector<cpu::Param<T>*>> copies;
    std::unique_ptr<cpu::PartOptimizer<T>> optimizer;
  };

  // The twin's gradients of this part into remote_, parameter by parameter.
  void exchange(const Part& part) {
    send_.clear();
    for (const cpu::Param<T>* prm : part.copies.front())
      send_.insert(send_.end(), prm->grad.data.begin(), prm->grad.data.end());
    recv_.resize(send_.size());
    in_pieces(send_.size(), [&](std::size_t at, int n) {
      check(
          MPI_Sendrecv(send_.data() + at, n, mpi_type<T>(), part.twin, part.part, recv_.data() + at,
                       n, mpi_type<T>(), part.twin, part.part, comm_, MPI_STATUS_IGNORE),
          "MPI_Sendrecv (the twin copy's gradients)");
    });
    remote_.resize(part.copies.front().size());
    std::size_t at = 0;
    for (std::size_t k = 0; k < remote_.size(); ++k) {
      const std::size_t n = part.copies.front()[k]->grad.data.size();
      remote_[k].assign(recv_.begin() + static_cast<std::ptrdiff_t>(at),
                        recv_.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
    }
  }

  int me_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<Part> parts_;
  std::vector<T> send_, recv_;
  std::vector<cpu::AlignedVector<T>> remote_;
};

}  // namespace ppbench::mpi
