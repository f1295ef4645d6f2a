#include "harness/mpi/launch_check.h"

#include <bit>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fnv1a.h"
#include "harness/launch.h"
#include "harness/mpi/mpi_run.h"
#include "schedules/validate.h"

namespace ppbench::mpi {

void require_process_count(const World& world, int pipeline_ranks, int replicas) {
  if (world.size() != pipeline_ranks * replicas)
    throw UsageError(launch_environment().command + " started " + std::to_string(world.size()) +
                     " processes, but --pp " + std::to_string(pipeline_ranks) + " x --dp " +
                     std::to_string(replicas) + " needs " +
                     std::to_string(pipeline_ranks * replicas) +
                     " (one process per pipeline rank of each replica)");
}

void require_messages_fit(const PartitionPlan& plan) {
  // Room for the message's header (cpu_codec.h: its send time, tensor count and shapes).
  constexpr std::int64_t kHeader = 4096;
  constexpr std::int64_t kLargest = std::numeric_limits<int>::max() - kHeader;
  for (std::size_t k = 0; k < plan.stages.size(); ++k) {
    const std::int64_t bytes = plan.stages[k].boundary_bytes_out;
    if (bytes > kLargest)
      throw UsageError("stage " + std::to_string(k) + " hands " + std::to_string(bytes) +
                       " bytes per micro-batch to the next, more than one MPI message carries (" +
                       std::to_string(kLargest) +
                       "): split the model into more stages or make the micro-batch smaller");
  }
}

namespace {

void add(Fnv1a& h, const std::vector<int>& values) {
  h.add_word(values.size());
  for (const int v : values) h.add_word(static_cast<std::uint64_t>(v));
}

void add(Fnv1a& h, const Task& t) {
  h.add_word(static_cast<std::uint64_t>(t.op));
  h.add_word(static_cast<std::uint64_t>(t.stage));
  h.add_word(static_cast<std::uint64_t>(t.mb));
}

}  // namespace

JobParts job_parts(const Schedule& s, const WorkloadSpec& spec, const PartitionPlan& plan,
                   const RunOptions& o, int replicas, bool overlap) {
  const auto word = [](auto v) { return static_cast<std::uint64_t>(v); };
  Fnv1a schedule;
  schedule.add_word(word(s.placement.ranks));
  add(schedule, s.placement.stage_rank);
  add(schedule, s.placement.stage_chain);
  add(schedule, s.placement.chain_microbatches);
  for (const auto& rank : s.ranks) {
    schedule.add_word(rank.size());
    for (const Action& a : rank) {
      add(schedule, a.task);
      schedule.add_word(word(a.paired()));
      if (a.paired()) add(schedule, a.partner);
    }
  }
  Fnv1a workload;
  workload.add_bytes(spec.workload);
  workload.add_bytes(spec.config.dump());
  workload.add_word(word(spec.dtype));
  workload.add_word(word(spec.microbatch_size));
  workload.add_word(spec.layers.size());
  Fnv1a options;
  add(options, plan.layer_counts);
  for (const int v : {o.steps, o.warmup, o.executor.channel_capacity, replicas})
    options.add_word(word(v));
  for (const bool b : {o.recompute, o.check, overlap}) options.add_word(word(b));
  options.add_word(o.seed);
  options.add_word(word(o.optimizer.kind));
  for (const double v : {o.check_tolerance, o.optimizer.lr, o.optimizer.weight_decay,
                         o.optimizer.beta1, o.optimizer.beta2, o.optimizer.eps})
    options.add_word(std::bit_cast<std::uint64_t>(v));
  return {schedule.value(), workload.value(), options.value()};
}

void require_one_job(const World& world, const JobParts& mine) {
  const std::uint64_t own[3] = {mine.schedule, mine.workload, mine.options};
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world.size()) * 3);
  check(MPI_Allgather(own, 3, MPI_UINT64_T, all.data(), 3, MPI_UINT64_T, world.comm()),
        "MPI_Allgather (job check)");
  static const char* const kWhat[3] = {
      "another schedule (the order of a --schedule-file read on its node, or --schedule and its "
      "flags)",
      "another workload (--workload and its shape flags, --dtype, --microbatch-size)",
      "other options (--partition or a --device-profile's layer counts, --steps, --warmup, --seed, "
      "--optimizer and its settings, --check, --recompute, --channel-capacity, --dp)"};
  for (int p = 1; p < world.size(); ++p)
    for (int k = 0; k < 3; ++k)
      if (all[static_cast<std::size_t>(p) * 3 + k] != all[static_cast<std::size_t>(k)])
        throw JobRefused{2, world.rank() == 0
                                ? "process " + std::to_string(p) + " was given " + kWhat[k] +
                                      " than process 0: every process must run one "
                                      "job (the same command line and the same files on every node)"
                                : std::string()};
}

void agree_to_start(const World& world, const std::function<void()>& checks) {
  int code = 0;
  std::string message;
  try {
    checks();
  } catch (const UsageError& e) {
    code = 2, message = e.what();
  } catch (const InvalidSchedule& e) {
    code = 2, message = e.what();
  } catch (const EnvironmentError& e) {
    code = 3, message = e.what();
  } catch (const std::bad_alloc& e) {
    code = 3, message = std::string("out of host memory: ") + e.what();  // the machine's limit
  } catch (const std::exception& e) {
    code = 1, message = e.what();
  }
  // MPI_MAXLOC: the largest code, and the lowest rank holding it.
  int worst[2] = {code, world.rank()};
  check(MPI_Allreduce(MPI_IN_PLACE, worst, 1, MPI_2INT, MPI_MAXLOC, world.comm()),
        "MPI_Allreduce (launch check)");
  if (worst[0] != 0) throw JobRefused{worst[0], world.rank() == worst[1] ? message : std::string()};
}

}  // namespace ppbench::mpi
