// The checks every multi-process run makes before any work, on every process together: a
// refusal seen by one process alone would leave the others waiting in their first collective.
#pragma once

#include <functional>

#include "harness/mpi/mpi_session.h"
#include "workloads/partition.h"

namespace ppbench::mpi {

// Throws UsageError unless the launcher started one process per pipeline rank of each replica.
void require_process_count(const World& world, int pipeline_ranks, int replicas);

// Throws UsageError where a stage's hand-over (its output, or the gradient sent back for it) would
// not fit one MPI message of the CPU transport, whose count is an int (2^31 - 1 bytes), naming the
// stage and its size; the same on every process.
void require_messages_fit(const PartitionPlan& plan);

// Runs `checks` on every process, then agrees on the outcome: if any process refused, every
// process throws JobRefused with the largest exit code among them (3, the machine's, over 2,
// usage, over 1), and only the lowest-numbered process refusing with that code carries the
// message, so that the launcher's output holds the reason once.
void agree_to_start(const World& world, const std::function<void()>& checks);

}  // namespace ppbench::mpi
