// NCCL's communicators bootstrapped over MPI, as nccl-tests does: process 0 of the MPI
// communicator makes the unique id (ncclGetUniqueId), MPI_Bcast hands its bytes to every process,
// and each calls ncclCommInitRank with its MPI rank. The broadcast is apart from NCCL so that it
// is tested without a GPU (tests/mpi).
#pragma once

#include <array>
#include <cstddef>
#include <functional>

#include "harness/mpi/mpi_session.h"

namespace ppbench::mpi {

// Every process of `comm` gets the bytes `make` wrote on process 0 (`make` runs there only).
// Collective.
template <std::size_t N>
std::array<char, N> broadcast_from_root(MPI_Comm comm,
                                        const std::function<void(std::array<char, N>&)>& make) {
  int rank = 0;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank (NCCL unique id)");
  std::array<char, N> id{};
  if (rank == 0) make(id);
  check(MPI_Bcast(id.data(), static_cast<int>(N), MPI_BYTE, 0, comm), "MPI_Bcast (NCCL unique id)");
  return id;
}

}  // namespace ppbench::mpi
