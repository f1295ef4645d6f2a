// The NCCL transport of one rank whose communicator was made outside it: by every process of a
// pipeline under mpirun, each calling ncclCommInitRank with the unique id process 0 broadcast
// (harness/mpi/nccl_bootstrap.h). Only with nccl.h at build time.
#pragma once

#include <memory>

#include "harness/cuda/nccl_api.h"

namespace ppbench::cuda {

class GpuTransport;

#if PPBENCH_HAVE_NCCL_H
// Rank `rank` of `ranks` over `comm`, which the transport now owns (destroyed with it, or
// aborted when a step failed).
std::shared_ptr<GpuTransport> make_nccl_rank_transport(ncclComm_t comm, int rank, int ranks);
#endif

}  // namespace ppbench::cuda
