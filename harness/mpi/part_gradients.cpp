#include "harness/mpi/part_gradients.h"

#include <cstring>
#include <set>
#include <stdexcept>

#include "harness/mpi/job_report.h"
#include "harness/mpi/mpi_session.h"
#include "harness/mpi/mpi_types.h"

namespace ppbench::mpi {

namespace {

// Sent after the last step, when every message of the steps has been received: none is in
// flight to be confused with these, and MPI keeps the order of one pair's messages of one tag.
constexpr int kCopyTag = 7100;

}  // namespace

std::vector<std::vector<int>> part_holders(const Placement& placement) {
  std::vector<std::set<int>> ranks(static_cast<std::size_t>(placement.stages_per_chain()));
  for (int s = 0; s < placement.stages(); ++s)
    ranks.at(static_cast<std::size_t>(placement.part(s)))
        .insert(placement.stage_rank[static_cast<std::size_t>(s)]);
  std::vector<std::vector<int>> out;
  for (const std::set<int>& r : ranks) out.emplace_back(r.begin(), r.end());
  return out;
}

void send_copy(MPI_Comm comm, int home, const std::vector<double>& values) {
  in_pieces(values.size(), [&](std::size_t at, int n) {
    check(MPI_Send(values.data() + at, n, MPI_DOUBLE, home, kCopyTag, comm),
          "MPI_Send (a gradient copy to its part's home)");
  });
}

void add_received_copy(MPI_Comm comm, int holder, std::vector<double>& sum,
                       std::vector<double>& buffer) {
  buffer.resize(sum.size());
  in_pieces(sum.size(), [&](std::size_t at, int n) {
    check(MPI_Recv(buffer.data() + at, n, MPI_DOUBLE, holder, kCopyTag, comm, MPI_STATUS_IGNORE),
          "MPI_Recv (a gradient copy at its part's home)");
  });
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += buffer[i];
}

std::vector<PartGradients> gather_part_gradients(MPI_Comm world,
                                                 const std::vector<PartGradients>& homed,
                                                 int pipeline_ranks, int parts) {
  // Plain bytes: one binary on every process (wire.h).
  std::vector<char> mine(homed.size() * sizeof(PartGradients));
  if (!mine.empty()) std::memcpy(mine.data(), homed.data(), mine.size());
  const std::vector<std::vector<char>> all = gather_bytes(world, mine);
  std::vector<PartGradients> out;
  if (all.empty()) return out;  // not process 0
  out.resize(static_cast<std::size_t>(parts));
  for (int part = 0; part < parts; ++part) out[static_cast<std::size_t>(part)].part = part;
  for (int p = 0; p < pipeline_ranks; ++p) {
    const std::vector<char>& b = all.at(static_cast<std::size_t>(p));
    if (b.size() % sizeof(PartGradients) != 0)
      throw std::logic_error("a process's part statistics are cut short");
    for (std::size_t at = 0; at < b.size(); at += sizeof(PartGradients)) {
      PartGradients g;
      std::memcpy(&g, b.data() + at, sizeof g);
      out.at(static_cast<std::size_t>(g.part)) = g;
    }
  }
  return out;
}

}  // namespace ppbench::mpi
