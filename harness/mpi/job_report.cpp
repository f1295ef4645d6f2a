#include "harness/mpi/job_report.h"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "harness/backends/cpu/cpu_run.h"
#include "harness/metrics.h"
#include "harness/mpi/mpi_session.h"
#include "harness/mpi/mpi_types.h"

namespace ppbench::mpi {

// Every process's bytes on process 0 (in process order); elsewhere, nothing. Point to point, in
// pieces: a collective's int counts would cap a record (a kept model's gradients) at 2 GiB.
std::vector<std::vector<char>> gather_bytes(MPI_Comm comm, const std::vector<char>& mine) {
  constexpr int kTag = 7200;
  int rank = 0, size = 1;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const auto n = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(size));
  check(MPI_Gather(&n, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, 0, comm), "MPI_Gather");
  std::vector<std::vector<char>> out;
  if (rank != 0) {
    in_pieces(mine.size(), [&](std::size_t at, int k) {
      check(MPI_Send(mine.data() + at, k, MPI_BYTE, 0, kTag, comm), "MPI_Send (a record)");
    });
    return out;
  }
  out.push_back(mine);
  for (int p = 1; p < size; ++p) {
    std::vector<char>& theirs =
        out.emplace_back(static_cast<std::size_t>(sizes[static_cast<std::size_t>(p)]));
    in_pieces(theirs.size(), [&](std::size_t at, int k) {
      check(MPI_Recv(theirs.data() + at, k, MPI_BYTE, p, kTag, comm, MPI_STATUS_IGNORE),
            "MPI_Recv (a record)");
    });
  }
  return out;
}

std::vector<StageParams<HostParam>> decode_gradients(const std::vector<char>& b, int rank,
                                                     std::deque<HostParam>& store) {
  WireReader r(b.data(), b.size());
  std::vector<StageParams<HostParam>> out(r.get<std::uint32_t>());
  for (auto& sp : out) {
    sp.rank = rank;
    sp.part = r.get<std::int32_t>();
    sp.layers.resize(r.get<std::uint32_t>());
    for (auto& [layer, params] : sp.layers) {
      layer = r.get<std::int32_t>();
      params.resize(r.get<std::uint32_t>());
      for (HostParam*& p : params) {
        HostParam& h = store.emplace_back();
        h.name = r.get_string();
        h.grad.resize(r.count<double>());
        r.read(h.grad.data(), h.grad.size());
        p = &h;
      }
    }
  }
  return out;
}

nlohmann::json job_json(const std::vector<ProcessReport>& procs, const Placement& placement,
                        int microbatches, double samples_per_microbatch, bool overlap) {
  const int d = placement.ranks;
  double first = std::numeric_limits<double>::infinity(), last = -first, busy = 0;
  nlohmann::json per = nlohmann::json::array();
  // Nodes numbered 0, 1, ... in the order of their first process.
  std::vector<std::int32_t> leaders;
  for (std::size_t w = 0; w < procs.size(); ++w) {
    auto node = std::find(leaders.begin(), leaders.end(), procs[w].node_leader);
    if (node == leaders.end()) node = leaders.insert(leaders.end(), procs[w].node_leader);
    const int p = static_cast<int>(w) % d;
    const RankMetrics m = compute_metrics(procs[w].trace, placement).ranks.at(p);
    busy += m.busy;
    if (!procs[w].trace.compute.empty()) {
      first = std::min(first, m.first_start);
      last = std::max(last, m.last_end);
    }
    per.push_back({{"process", w},
                   {"replica", static_cast<int>(w) / d},
                   {"pipeline_rank", p},
                   {"host", procs[w].host},
                   {"node", node - leaders.begin()},
                   {"local_rank", procs[w].local_rank},
                   {"clock_offset_s", procs[w].clock_offset},
                   {"clock_offset_uncertainty_s", procs[w].clock_offset_uncertainty},
                   {"step_start_s", procs[w].step_start},
                   {"busy_s", m.busy},
                   {"allreduce_s", m.allreduce_time},
                   {"allreduce_bytes", m.allreduce_bytes},
                   {"exposed_allreduce_s", m.exposed_allreduce}});
  }
  const double makespan = last > first ? last - first : 0;
  const double processes = static_cast<double>(procs.size());
  const int replicas = static_cast<int>(procs.size()) / d;
  return {{"processes", procs.size()},
          {"nodes", leaders.size()},
          {"pipeline_ranks", d},
          {"replicas", replicas},
          {"overlap", overlap},
          {"makespan_s", makespan},
          {"bubble_fraction", makespan > 0 ? 1 - busy / (processes * makespan) : 0},
          {"samples_per_s",
           makespan > 0 ? replicas * microbatches * samples_per_microbatch / makespan : 0},
          {"per_process", per}};
}

Trace replica0_trace(const std::vector<ProcessReport>& procs, int d, const std::string& source,
                     int shared_cores) {
  Trace t;
  t.source = source;
  t.time_unit = "s";
  t.ranks = d;
  t.shared_cores = shared_cores;
  if (shared_cores > 0)
    for (int p = 0; p < d; ++p)
      t.rank_cpu.push_back(procs.at(static_cast<std::size_t>(p)).rank_cpu);
  for (int p = 0; p < d; ++p) {
    const Trace& x = procs.at(static_cast<std::size_t>(p)).trace;
    t.compute.insert(t.compute.end(), x.compute.begin(), x.compute.end());
    t.comm.insert(t.comm.end(), x.comm.begin(), x.comm.end());
    t.collectives.insert(t.collectives.end(), x.collectives.begin(), x.collectives.end());
    t.updates.insert(t.updates.end(), x.updates.begin(), x.updates.end());
    t.memory.insert(t.memory.end(), x.memory.begin(), x.memory.end());
  }
  return t;
}

Trace job_trace(const std::vector<ProcessReport>& procs, int d, const std::string& source) {
  Trace out;
  out.source = source;
  out.time_unit = "s";
  out.ranks = static_cast<int>(procs.size());
  for (std::size_t w = 0; w < procs.size(); ++w) {
    const auto id = static_cast<std::int32_t>(w);
    const std::int32_t base = id - id % d;  // process of this replica's pipeline rank 0
    const Trace& t = procs[w].trace;
    for (ComputeEvent e : t.compute) {
      e.rank = id;
      out.compute.push_back(e);
    }
    for (CommEvent e : t.comm) {
      e.src_rank += base;
      e.dst_rank += base;
      out.comm.push_back(e);
    }
    for (CollectiveEvent e : t.collectives) {
      e.rank = id;
      out.collectives.push_back(e);
    }
    for (UpdateEvent e : t.updates) {
      e.rank = id;
      out.updates.push_back(e);
    }
    for (MemorySample e : t.memory) {
      e.rank = id;
      out.memory.push_back(e);
    }
  }
  return out;
}

JobStep agree_on_step(MPI_Comm comm, const Trace& trace, double loss_sum, int microbatches) {
  double span[2] = {std::numeric_limits<double>::infinity(),
                    -std::numeric_limits<double>::infinity()};
  for (const auto& e : trace.compute) {
    span[0] = std::min(span[0], e.start);
    span[1] = std::max(span[1], e.end);
  }
  for (const auto& e : trace.collectives) span[1] = std::max(span[1], e.end);
  for (const auto& e : trace.updates) span[1] = std::max(span[1], e.end);
  span[0] = -span[0];  // one MPI_MAX gives the earliest start and the latest end
  check(MPI_Allreduce(MPI_IN_PLACE, span, 2, MPI_DOUBLE, MPI_MAX, comm),
        "MPI_Allreduce (makespan)");
  check(MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, comm),
        "MPI_Allreduce (loss)");
  return {span[1] + span[0], loss_sum / static_cast<double>(microbatches)};
}

std::vector<ProcessReport> decode_reports(const std::vector<std::vector<char>>& reports,
                                          int pipeline_ranks) {
  std::vector<ProcessReport> procs;
  for (const auto& b : reports) {
    procs.push_back(ProcessReport::decode(b));
    procs.back().trace.ranks = pipeline_ranks;  // as the schedule's placement numbers them
    procs.back().trace.time_unit = "s";
  }
  return procs;
}

void summarize_replica0_gradients(const WorkloadSpec& spec,
                                  const std::vector<std::vector<char>>& gradients,
                                  int pipeline_ranks, int parts, StepValues& values) {
  std::deque<HostParam> store;
  std::vector<std::vector<StageParams<HostParam>>> by_rank;
  for (int p = 0; p < pipeline_ranks; ++p)
    by_rank.push_back(decode_gradients(gradients.at(static_cast<std::size_t>(p)), p, store));
  summarize_gradients_on_host(
      spec, by_rank, parts, /*keep=*/true, values,
      [](const StageParams<HostParam>&, const HostParam* h, std::vector<double>& sum) {
        if (sum.empty()) sum.assign(h->grad.size(), 0.0);
        for (std::size_t i = 0; i < h->grad.size(); ++i) sum[i] += h->grad[i];
      });
}

nlohmann::json mpi_library_json(const std::vector<std::string>& environment) {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  check(MPI_Get_library_version(text, &len), "MPI_Get_library_version");
  // Open MPI counts the terminating NUL in `len`; the text ends at the first NUL or line break,
  // less trailing blanks.
  std::string library(text,
                      static_cast<std::size_t>(std::clamp(len, 0, static_cast<int>(sizeof text))));
  library = library.substr(0, library.find_first_of(std::string("\n\0", 2)));
  library.erase(library.find_last_not_of(" \t\r") + 1);
  int version = 0, subversion = 0;
  check(MPI_Get_version(&version, &subversion), "MPI_Get_version");
  nlohmann::json settings = nlohmann::json::object();
  const std::string prefix = "OMPI_MCA_";
  for (const std::string& entry : environment) {
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos || entry.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string name = entry.substr(prefix.size(), eq - prefix.size());
    // The frameworks that carry messages and collectives; mpirun's own bookkeeping (orte_*,
    // ess_*, pmix) says nothing about them.
    for (const char* framework : {"btl", "pml", "mtl", "coll"}) {
      const std::string f = framework;
      if (name == f || name.compare(0, f.size() + 1, f + "_") == 0) {
        settings[name] = entry.substr(eq + 1);
        break;
      }
    }
  }
  return {{"library", library},
          {"standard", std::to_string(version) + "." + std::to_string(subversion)},
          {"settings", settings}};
}

std::vector<std::string> process_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

void finish_job_record(RunOutput& out, nlohmann::json record, const WorkloadSpec& spec,
                       const RunOptions& o, int microbatches, int replicas,
                       const std::vector<ProcessReport>& procs, int pipeline_ranks,
                       const std::string& backend) {
  if (replicas > 1) {
    for (const char* k :
         {"samples_per_s", "wall_samples_per_s", "tokens_per_s", "wall_tokens_per_s"})
      if (record["throughput"].contains(k))
        record["throughput"][k] = record["throughput"][k].get<double>() * replicas;
    record["throughput"]["note"] = "all " + std::to_string(replicas) + " replicas' micro-batches";
  }
  const int all = microbatches * replicas;
  if (o.check)
    record["check"] =
        cpu_check(spec, o, all, out.values, " over all " + std::to_string(all) + " micro-batches");
  if (!o.keep_gradients) out.values.tensors.clear();
  out.record = std::move(record);
  out.trace = job_trace(procs, pipeline_ranks, backend);
}

}  // namespace ppbench::mpi
