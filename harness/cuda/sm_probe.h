// Which streaming multiprocessors a stream's kernels run on, read from the %smid register: the
// proof that a green-context partition confines a rank's work to its own SMs (virtual devices
// must not share SMs, or their "devices" would not be devices).
#pragma once

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace ppbench::cuda {

// Launches `blocks` blocks on `stream` (each busy for a few microseconds, so that they spread
// over every SM the stream may use) and returns the sorted distinct SM ids they ran on. The
// calling thread must have the stream's context current.
std::vector<int> sms_used(cudaStream_t stream, int blocks);

struct SmProbeReport {
  std::vector<std::vector<int>> per_rank;  // distinct SM ids observed
  bool disjoint = true;                    // no SM seen by two ranks
  bool within_grant = true;                // no rank saw more SMs than it was granted
  std::string summary;                     // one line
};

// The host-side judgement of what every rank observed, given the SMs each was granted.
SmProbeReport judge_sm_probe(std::vector<std::vector<int>> per_rank,
                             const std::vector<int>& granted);

}  // namespace ppbench::cuda
