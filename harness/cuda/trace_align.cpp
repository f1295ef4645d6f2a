#include "harness/cuda/trace_align.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ppbench {

namespace {

void check_rank(int r, int ranks, const char* what) {
  if (r < 0 || r >= ranks)
    throw std::invalid_argument(std::string("trace alignment: ") + what + " names rank " +
                                std::to_string(r) + " of " + std::to_string(ranks));
}

void check_interval(float start, float end, const char* what, int rank) {
  if (!std::isfinite(start) || !std::isfinite(end) || start < 0 || end < start)
    throw std::invalid_argument(std::string("trace alignment: ") + what + " on rank " +
                                std::to_string(rank) + " has times " + std::to_string(start) +
                                " .. " + std::to_string(end) + " ms");
}

}  // namespace

Trace align_gpu_trace(int ranks, const std::vector<RankStart>& starts,
                      const std::vector<GpuComputeTiming>& compute,
                      const std::vector<GpuCommTiming>& comm,
                      const std::vector<GpuUpdateTiming>& updates) {
  if (ranks < 1) throw std::invalid_argument("trace alignment: no ranks");
  std::vector<double> start(ranks, NAN);
  for (const auto& s : starts) {
    check_rank(s.rank, ranks, "a start event");
    if (!std::isnan(start[s.rank]))
      throw std::invalid_argument("trace alignment: rank " + std::to_string(s.rank) +
                                  " has two start events");
    if (!std::isfinite(s.host_seconds))
      throw std::invalid_argument("trace alignment: rank " + std::to_string(s.rank) +
                                  " start time is not finite");
    start[s.rank] = s.host_seconds;
  }
  for (int r = 0; r < ranks; ++r)
    if (std::isnan(start[r]))
      throw std::invalid_argument("trace alignment: rank " + std::to_string(r) +
                                  " has no start event");
  const double zero = *std::min_element(start.begin(), start.end());
  // Offsets are taken first so the large host epoch cancels before milliseconds are added.
  std::vector<double> offset(ranks);
  for (int r = 0; r < ranks; ++r) offset[r] = start[r] - zero;
  auto at = [&](int rank, float ms) { return offset[rank] + static_cast<double>(ms) * 1e-3; };

  Trace t;
  t.source = "cuda";
  t.time_unit = "s";
  t.ranks = ranks;
  t.compute.reserve(compute.size());
  for (const auto& e : compute) {
    check_rank(e.rank, ranks, "a compute event");
    check_interval(e.start_ms, e.end_ms, "a compute event", e.rank);
  }
  for (int r = 0; r < ranks; ++r)
    for (const auto& e : compute)
      if (e.rank == r) t.compute.push_back({r, at(r, e.start_ms), at(r, e.end_ms), e.action});
  for (const auto& e : comm) {
    check_rank(e.src_rank, ranks, "a transfer's source");
    check_rank(e.dst_rank, ranks, "a transfer's destination");
    check_rank(e.timed_on, ranks, "a transfer's timing rank");
    check_interval(e.start_ms, e.end_ms, "a transfer", e.timed_on);
    t.comm.push_back(
        {e.src_rank, e.dst_rank, at(e.timed_on, e.start_ms), at(e.timed_on, e.end_ms), e.task});
  }
  for (const auto& e : updates) {
    check_rank(e.rank, ranks, "an optimizer step");
    check_interval(e.start_ms, e.end_ms, "an optimizer step", e.rank);
  }
  for (int r = 0; r < ranks; ++r)
    for (const auto& e : updates)
      if (e.rank == r) t.updates.push_back({r, at(r, e.start_ms), at(r, e.end_ms), e.stage});
  std::stable_sort(t.comm.begin(), t.comm.end(),
                   [](const CommEvent& a, const CommEvent& b) { return a.start < b.start; });
  return t;
}

}  // namespace ppbench
