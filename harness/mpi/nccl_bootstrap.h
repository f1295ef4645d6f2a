// NCCL's communicators bootstrapped over MPI, as nccl-tests does: process 0 of the MPI
// communicator makes the unique id (ncclGetUniqueId), MPI_Bcast hands its bytes to every process,
// and each calls ncclCommInitRank with its MPI rank. The broadcast is apart from NCCL so that it
// is tested without a GPU (tests/mpi).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <exception>
#include <functional>

#include "core/error.h"
#include "harness/mpi/mpi_session.h"

namespace ppbench::mpi {

// Every process of `comm` gets the bytes `make` wrote on process 0 (`make` runs there only).
// Collective. Where `make` throws, process 0 still takes part in the broadcast (a flag says the
// id is missing) and then rethrows, and every other process throws too, naming process 0: none is
// left waiting in MPI_Bcast for an id that never comes.
template <std::size_t N>
std::array<char, N> broadcast_from_root(MPI_Comm comm,
                                        const std::function<void(std::array<char, N>&)>& make) {
  int rank = 0;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank (NCCL unique id)");
  std::array<char, N + 1> message{};  // the id, then 1 where process 0 made it
  std::exception_ptr failure;
  if (rank == 0) {
    try {
      std::array<char, N> id{};
      make(id);
      std::copy(id.begin(), id.end(), message.begin());
      message[N] = 1;
    } catch (...) {
      failure = std::current_exception();
    }
  }
  check(MPI_Bcast(message.data(), static_cast<int>(N + 1), MPI_BYTE, 0, comm),
        "MPI_Bcast (NCCL unique id)");
  if (failure) std::rethrow_exception(failure);
  if (message[N] != 1)
    throw EnvironmentError(
        "process 0 could not make the NCCL unique id (its own message says why)");
  std::array<char, N> id{};
  std::copy(message.begin(), message.begin() + N, id.begin());
  return id;
}

}  // namespace ppbench::mpi
