// What an MPI library carries between two processes, one way and both ways at once: the two
// figures an all-reduce across a link is bound by (benchmarks/allreduce_link.py runs it on two
// emulated nodes). Started as `mpirun -np 2 mpi_duplex BYTES REPEATS`; process 1 prints one JSON
// line: the median over REPEATS of
//   one_way_bytes_per_s     process 0 sends BYTES, process 1 receives them (MPI_Send/MPI_Recv);
//   both_ways_bytes_per_s   each sends BYTES to the other at once (MPI_Isend and MPI_Irecv,
//                           polled), per direction;
//   both_ways_first_share   when the first of process 1's two transfers of that exchange ended,
//                           as a share of the exchange: near 1 where the two directions moved at
//                           once, near 1/2 where they took turns (one whole message, then the
//                           other).
// A link that carries both directions at full rate (TCP does) gives the same rate twice and a
// share near 1; an MPI transport that sends one direction after the other, half the rate and a
// share near 1/2.
// Exit codes: 0 done; 2 bad arguments or not two processes (one line, process 0); 1 an MPI error.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <mpi.h>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

long parse(const char* text, long lo, long hi) {
  char* end = nullptr;
  const long x = std::strtol(text, &end, 10);
  return (*end == '\0' && x >= lo && x <= hi) ? x : -1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Up to 1 GiB a message, as one MPI count of bytes (an int).
  const long bytes = argc == 3 ? parse(argv[1], 1, 1L << 30) : -1;
  const long repeats = argc == 3 ? parse(argv[2], 1, 1000) : -1;
  if (size != 2 || bytes < 0 || repeats < 0) {
    if (rank == 0)
      std::fprintf(stderr,
                   "mpi_duplex: run as mpirun -np 2 mpi_duplex BYTES REPEATS (BYTES 1 to 2^30, "
                   "REPEATS 1 to 1000); got %d processes and %s %s\n",
                   size, argc > 1 ? argv[1] : "(none)", argc > 2 ? argv[2] : "(none)");
    MPI_Finalize();
    return 2;
  }
  const int count = static_cast<int>(bytes);
  const int peer = 1 - rank;
  std::vector<char> out(static_cast<std::size_t>(bytes), 1), in(static_cast<std::size_t>(bytes));
  std::vector<double> one_way, both_ways, first_share;
  for (long r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    if (rank == 0)
      MPI_Send(out.data(), count, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    else
      MPI_Recv(in.data(), count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    one_way.push_back(static_cast<double>(bytes) / (MPI_Wtime() - t));
    MPI_Barrier(MPI_COMM_WORLD);
    t = MPI_Wtime();
    MPI_Request requests[2];
    MPI_Irecv(in.data(), count, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &requests[0]);
    MPI_Isend(out.data(), count, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &requests[1]);
    // Polled rather than waited on, to see when each direction ends.
    double first = 0, last = 0;
    for (int done = 0; done < 2;) {
      int index = MPI_UNDEFINED, flag = 0;
      MPI_Testany(2, requests, &index, &flag, MPI_STATUS_IGNORE);
      if (flag && index != MPI_UNDEFINED) (++done == 1 ? first : last) = MPI_Wtime() - t;
    }
    both_ways.push_back(static_cast<double>(bytes) / last);
    first_share.push_back(first / last);
  }
  if (rank == 1)
    std::printf(
        "{\"bytes\": %ld, \"repeats\": %ld, \"one_way_bytes_per_s\": %.6g, "
        "\"both_ways_bytes_per_s\": %.6g, \"both_ways_first_share\": %.4f}\n",
        bytes, repeats, median(one_way), median(both_ways), median(first_share));
  MPI_Finalize();
  return 0;
}
