// `mpirun -np P ppbench run --pp D --dp R ...`: one process per pipeline rank of each of R
// replicas (P = D * R), the CPU backend's passes, activations and gradients over MPI
// (mpi_transport.h), the replicas' gradients all-reduced (data_parallel.h). Process 0 gathers
// every process's trace (on one clock), the gradients and the activation peaks, and writes the
// one record; the step equals one device over all R * N micro-batches.
#pragma once

#include <string>

#include "harness/backends/run_options.h"
#include "workloads/layer_spec.h"

namespace ppbench {

struct DataParallelOptions {
  int replicas = 1;      // R
  bool overlap = false;  // --dp-overlap: each stage's all-reduce starts after its last backward
};

// The job refused to start (checked by every process together before any work): the process
// that names the problem has `message`; the others exit with `code` quietly, so that the
// launcher's output holds the reason once.
struct JobRefused {
  int code;
  std::string message;
};

// Called on every process of the job. Throws JobRefused when the launch or the options do not
// fit (one process names the problem); a failure during the steps ends the whole job.
RunOutput run_cpu_mpi(const WorkloadSpec& spec, const RunOptions& o, const DataParallelOptions& dp);

}  // namespace ppbench
