// The MPI datatype of a C++ element type, and MPI's int counts over buffers of any size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <mpi.h>

namespace ppbench::mpi {

template <typename T>
MPI_Datatype mpi_type() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

// Calls piece(offset, count) over [0, n) in pieces whose counts fit MPI's int.
template <class Piece>
void in_pieces(std::size_t n, Piece piece) {
  constexpr std::size_t kMax = std::size_t{1} << 30;
  for (std::size_t at = 0; at < n; at += kMax) piece(at, static_cast<int>(std::min(kMax, n - at)));
}

}  // namespace ppbench::mpi
