// Replica 0's gradient statistics (StepValues::parts) computed where its gradients are, so that a
// run across processes moves no gradient tensor to process 0 unless --check (or a test, with
// RunOptions::keep_gradients) asks for the tensors (an 8B-shaped model's gradients, widened to
// double, would not fit one process's memory, nor one MPI message).
//
// Each model part is counted on its home, the lowest pipeline rank that holds a copy of it.
// Where Chimera or DualPipe keep a second copy on another rank, that rank sends its gradients to
// the home one tensor at a time and the home sums them in double, in rank order, as
// summarize_gradients_on_host sums the copies held in one process; a part with one copy is
// counted where it lies (a GPU reduces it on its device). Process 0 then gathers a few numbers
// per part.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "harness/backends/step_values.h"
#include "harness/mpi/job_report.h"
#include "harness/mpi/mpi_session.h"
#include "schedules/placement.h"
#include "workloads/layer_spec.h"

namespace ppbench::mpi {

// part -> the pipeline ranks that hold a copy of it, ascending and without repeats.
std::vector<std::vector<int>> part_holders(const Placement& placement);

// A gradient copy's values between two pipeline ranks, in pieces that fit MPI's int counts.
void send_copy(MPI_Comm comm, int home, const std::vector<double>& values);
// Receives `sum.size()` values from `holder` and adds them to `sum` (`buffer`: scratch).
void add_received_copy(MPI_Comm comm, int holder, std::vector<double>& sum,
                       std::vector<double>& buffer);

// Adds one copy's values to `sum` in double (the first copy sizes it).
template <class Values>
void add_copy(std::vector<double>& sum, const Values& values, const std::string& param) {
  if (sum.empty()) {
    sum.assign(values.begin(), values.end());
    return;
  }
  if (static_cast<std::size_t>(values.size()) != sum.size())
    throw std::logic_error("the copies of parameter " + param + " differ in size");
  std::size_t i = 0;
  for (const auto v : values) sum[i++] += static_cast<double>(v);
}

// Collective over replica 0's `pipeline` communicator (every pipeline rank calls it with its
// stages, `mine`, in params_by_layer() order). `values(param)` is a gradient in double order of
// elements the same on every copy; `lone(stats, param)` adds a gradient that no other copy meets.
// Returns the statistics of the parts homed on pipeline rank `me`.
template <class Param, class Values, class Lone>
std::vector<PartGradients> home_part_gradients(const Placement& placement, MPI_Comm pipeline,
                                               int me, const std::vector<StageParams<Param>>& mine,
                                               Values&& values, Lone&& lone) {
  const std::vector<std::vector<int>> holders = part_holders(placement);
  std::vector<PartGradients> homed;
  std::vector<double> sum, buffer;
  for (int part = 0; part < static_cast<int>(holders.size()); ++part) {
    const std::vector<int>& at = holders[static_cast<std::size_t>(part)];
    if (std::find(at.begin(), at.end(), me) == at.end()) continue;
    std::vector<const StageParams<Param>*> local;
    for (const StageParams<Param>& sp : mine)
      if (sp.part == part) local.push_back(&sp);
    if (local.empty())
      throw std::logic_error("pipeline rank " + std::to_string(me) + " holds no stage of part " +
                             std::to_string(part) + " that its placement gives it");
    const int home = at.front();
    const bool alone = at.size() == 1 && local.size() == 1;
    PartGradients stats;
    stats.part = part;
    const StageParams<Param>& first = *local.front();
    for (std::size_t l = 0; l < first.layers.size(); ++l)
      for (std::size_t k = 0; k < first.layers[l].second.size(); ++k) {
        const Param& p = *first.layers[l].second[k];
        if (alone) {
          lone(stats, p);
          continue;
        }
        sum.clear();
        for (const StageParams<Param>* c : local)
          add_copy(sum, values(*c->layers.at(l).second.at(k)), p.name);
        if (me != home) {
          send_copy(pipeline, home, sum);
          continue;
        }
        // Every rank walks the parts and their tensors in the same order, so the copies arrive
        // in it: rank by rank, ascending, as in one process.
        for (int holder : at)
          if (holder != me) add_received_copy(pipeline, holder, sum, buffer);
        accumulate(stats, sum.data(), sum.size());
      }
    if (me == home) homed.push_back(stats);
  }
  return homed;
}

// Collective over the world communicator: on process 0, replica 0's statistics of every one of
// `parts` parts from what its `pipeline_ranks` processes homed (processes of other replicas pass
// none); elsewhere, nothing.
std::vector<PartGradients> gather_part_gradients(MPI_Comm world,
                                                 const std::vector<PartGradients>& homed,
                                                 int pipeline_ranks, int parts);

// How a run across processes ends its gradients' story (collective over `world`): on process 0,
// replica 0's gradient statistics into `out` (`report`: this is process 0), with the tensors
// themselves, in the CPU layout that `values(param)` gives, only where `keep`; every process
// passes its own stages (`mine`) and, for a part no other copy meets, `lone`.
template <class Param, class Values, class Lone>
void replica0_gradients(const WorkloadSpec& spec, const Placement& placement, const Grid& grid,
                        MPI_Comm world, int parts, bool keep, bool report,
                        const std::vector<StageParams<Param>>& mine, Values&& values, Lone&& lone,
                        StepValues& out) {
  const int d = grid.pipeline_ranks;
  if (keep) {
    const auto grads = gather_bytes(
        world, grid.replica == 0 ? encode_gradients(mine, values) : std::vector<char>{});
    if (report) summarize_replica0_gradients(spec, grads, d, parts, out);
    return;
  }
  std::vector<PartGradients> homed;
  if (grid.replica == 0)
    homed = home_part_gradients(placement, grid.pipeline, grid.pipeline_rank, mine, values, lone);
  std::vector<PartGradients> all = gather_part_gradients(world, homed, d, parts);
  if (!report) return;
  out.parts = std::move(all);
  out.tensors.clear();
}

}  // namespace ppbench::mpi
