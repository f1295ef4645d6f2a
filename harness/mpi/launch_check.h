// The checks every multi-process run makes before any work, on every process together: a
// refusal seen by one process alone would leave the others waiting in their first collective.
#pragma once

#include <cstdint>
#include <functional>

#include "harness/backends/run_options.h"
#include "harness/mpi/mpi_session.h"
#include "schedules/schedule.h"
#include "workloads/layer_spec.h"
#include "workloads/partition.h"

namespace ppbench::mpi {

// Throws UsageError unless the launcher started one process per pipeline rank of each replica.
void require_process_count(const World& world, int pipeline_ranks, int replicas);

// Throws UsageError where a stage's hand-over (its output, or the gradient sent back for it) would
// not fit one MPI message of the CPU transport, whose count is an int (2^31 - 1 bytes), naming the
// stage and its size; the same on every process.
void require_messages_fit(const PartitionPlan& plan);

// What makes the processes one job, a hash per part. Each process parses its own command line and
// reads its own --schedule-file (and --device-profile) from its own disk, and tags its messages by
// their place in its own program: two processes running different orders of one shape would
// exchange each other's tensors, the wrong ones, without an error.
struct JobParts {
  std::uint64_t schedule = 0;  // the placement and every rank's actions
  std::uint64_t workload = 0;  // the workload, its shape settings, dtype and micro-batch size
  std::uint64_t options = 0;   // the partition, steps, seed, optimizer, --check, --dp and more
};
JobParts job_parts(const Schedule& s, const WorkloadSpec& spec, const PartitionPlan& plan,
                   const RunOptions& o, int replicas, bool overlap);

// Throws JobRefused (exit 2, process 0 naming the first process that differs and in what) unless
// every process holds process 0's parts. After agree_to_start, on every process.
void require_one_job(const World& world, const JobParts& mine);

// Runs `checks` on every process, then agrees on the outcome: if any process refused, every
// process throws JobRefused with the largest exit code among them (3, the machine's, over 2,
// usage, over 1), and only the lowest-numbered process refusing with that code carries the
// message, so that the launcher's output holds the reason once.
void agree_to_start(const World& world, const std::function<void()>& checks);

}  // namespace ppbench::mpi
