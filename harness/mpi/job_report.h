// What every process of an mpirun job reports to process 0 after its last step, shared by the
// CPU (mpi_run.cpp) and the CUDA (cuda_mpi_run.cpp) runs across processes: the bytes gathered,
// each process's trace, memory and clock offset, replica 0's gradients, and the job's metrics.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "harness/backends/run_options.h"
#include "harness/backends/run_record.h"
#include "harness/backends/step_values.h"
#include "harness/mpi/wire.h"
#include "harness/trace.h"
#include "schedules/placement.h"

namespace ppbench::mpi {

// Every process's bytes on process 0 (in process order); elsewhere, nothing.
std::vector<std::vector<char>> gather_bytes(MPI_Comm comm, const std::vector<char>& mine);

template <class Event>
void put_events(WireWriter& w, const std::vector<Event>& v) {
  w.put_array(v.data(), v.size());
}
template <class Event>
void get_events(WireReader& r, std::vector<Event>& v) {
  v.resize(r.count<Event>());
  r.read(v.data(), v.size());
}

// What each process sends process 0 after the last step.
struct ProcessReport {
  Trace trace;      // ranks numbered by pipeline rank
  HeldMemory held;  // activations: the arena's peak
  double clock_offset = 0;
  double clock_offset_uncertainty = 0;  // half the shortest round trip it was measured with
  // When its last step began, on process 0's clock, from process 0's reading as it left the
  // step's barrier: how far apart the processes started.
  double step_start = 0;
  std::string host;
  std::int32_t node_leader = 0;  // World::node_leader()
  std::int32_t local_rank = 0;   // World::local_rank()
  double rank_cpu = -1;  // the process's CPU time over the step, where processes share cores

  std::vector<char> encode() const {
    WireWriter w;
    put_events(w, trace.compute);
    put_events(w, trace.comm);
    put_events(w, trace.collectives);
    put_events(w, trace.updates);
    put_events(w, trace.memory);
    w.put(held);
    w.put(clock_offset);
    w.put(clock_offset_uncertainty);
    w.put(step_start);
    w.put_string(host);
    w.put(node_leader);
    w.put(local_rank);
    w.put(rank_cpu);
    return std::move(w.bytes());
  }
  static ProcessReport decode(const std::vector<char>& b) {
    WireReader r(b.data(), b.size());
    ProcessReport p;
    get_events(r, p.trace.compute);
    get_events(r, p.trace.comm);
    get_events(r, p.trace.collectives);
    get_events(r, p.trace.updates);
    get_events(r, p.trace.memory);
    p.held = r.get<HeldMemory>();
    p.clock_offset = r.get<double>();
    p.clock_offset_uncertainty = r.get<double>();
    p.step_start = r.get<double>();
    p.host = r.get_string();
    p.node_leader = r.get<std::int32_t>();
    p.local_rank = r.get<std::int32_t>();
    p.rank_cpu = r.get<double>();
    return p;
  }
};

// A parameter's gradient as process 0 receives it, for the shared summary.
struct HostParam {
  std::string name;
  std::vector<double> grad;
};

// A process's gradients in the wire form decode_gradients reads: per stage its part, per layer
// its parameters' names and gradients, widened to doubles in the CPU layout by `cpu_layout(p)`
// (a CPU parameter's own values; a GPU parameter's, downloaded).
template <class Param, class CpuLayout>
std::vector<char> encode_gradients(const std::vector<StageParams<Param>>& stages,
                                   CpuLayout&& cpu_layout) {
  WireWriter w;
  w.put<std::uint32_t>(static_cast<std::uint32_t>(stages.size()));
  std::vector<double> g;
  for (const auto& sp : stages) {
    w.put<std::int32_t>(sp.part);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(sp.layers.size()));
    for (const auto& [layer, params] : sp.layers) {
      w.put<std::int32_t>(layer);
      w.put<std::uint32_t>(static_cast<std::uint32_t>(params.size()));
      for (const Param* p : params) {
        w.put_string(p->name);
        const auto values = cpu_layout(*p);
        g.assign(values.begin(), values.end());
        w.put_array(g.data(), g.size());
      }
    }
  }
  return std::move(w.bytes());
}

// Process `rank`'s gradients as encode_gradients wrote them.
std::vector<StageParams<HostParam>> decode_gradients(const std::vector<char>& b, int rank,
                                                     std::deque<HostParam>& store);

// The step as the whole job saw it, agreed by every process (collective): its makespan, from the
// first action of any process to the last action, all-reduce or update of any, and the mean loss
// over all `microbatches` of all replicas (`loss_sum`: this process's losses summed).
struct JobStep {
  double makespan = 0;
  double loss = 0;
};
JobStep agree_on_step(MPI_Comm comm, const Trace& trace, double loss_sum, int microbatches);

// On process 0: every process's report as gathered, its ranks numbered by pipeline rank.
std::vector<ProcessReport> decode_reports(const std::vector<std::vector<char>>& reports,
                                          int pipeline_ranks);

// On process 0: replica 0's gradients (processes 0 .. D-1, as gathered) summed per part into
// `values`, as a run in threads does, every tensor kept (they were gathered for that).
void summarize_replica0_gradients(const WorkloadSpec& spec,
                                  const std::vector<std::vector<char>>& gradients,
                                  int pipeline_ranks, int parts, StepValues& values);

// On process 0, how the CPU and CUDA runs across processes both finish `out` with their
// `record`: its throughput counts every replica's samples (the step trains on R x N
// micro-batches); with `--check`, the step is held to the CPU's float64 single-device step over
// all R x N micro-batches, judged as a run in threads is; the full gradients are dropped unless
// kept; the exported timeline holds every process, numbered by process.
void finish_job_record(RunOutput& out, nlohmann::json record, const WorkloadSpec& spec,
                       const RunOptions& o, int microbatches, int replicas,
                       const std::vector<ProcessReport>& procs, int pipeline_ranks,
                       const std::string& backend);

// The MPI library this process runs on and how its transports were set, for the record's
// `launch.mpi`: `library` (the first line of MPI_Get_library_version), `standard` (MPI_Get_version)
// and `settings`, every Open MPI parameter of the point-to-point and collective frameworks (btl,
// pml, mtl, coll) set in `environment` ("NAME=VALUE" strings; mpirun passes each `--mca NAME
// VALUE` as OMPI_MCA_NAME), as {NAME: VALUE}. A run's hand-overs and all-reduces depend on
// them as much as on the network (docs/multi-process.md).
nlohmann::json mpi_library_json(const std::vector<std::string>& environment);

// This process's environment as "NAME=VALUE" strings.
std::vector<std::string> process_environment();

// The whole job's metrics: every process's busy time against the job's makespan (first action
// of any process to the last action or all-reduce of any), and each process's all-reduces.
nlohmann::json job_json(const std::vector<ProcessReport>& procs, const Placement& placement,
                        int microbatches, double samples_per_microbatch, bool overlap);

// Replica 0's trace (processes 0 .. D-1), ranks by pipeline rank: what a record's measured
// metrics and replay read, as for a run in threads. `shared_cores` (mpi::core_sharing's
// replay_cores): the cores the processes shared, whose CPU times the replay then reads; 0 where
// each had its own.
Trace replica0_trace(const std::vector<ProcessReport>& procs, int pipeline_ranks,
                     const std::string& source, int shared_cores = 0);

// The exported timeline: every process's events, numbered by process.
Trace job_trace(const std::vector<ProcessReport>& procs, int pipeline_ranks,
                const std::string& source);

}  // namespace ppbench::mpi
