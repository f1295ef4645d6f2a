// Per-rank record of live activation bytes: every activation a rank keeps
// for a later backward is accounted here, so that the measured peak can be
// set beside the memory model's prediction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "harness/trace.h"

namespace ppbench {

class ActivationArena {
 public:
  explicit ActivationArena(int rank) : rank_(rank) {}

  // The rank's kept bytes changed to `live` at `time` (seconds since the
  // step began); the rank's thread is the only writer.
  void set_live(double time, double live) {
    live_ = live;
    peak_ = std::max(peak_, live);
    samples_.push_back({rank_, time, live});
  }
  // A peak within an action, above what the rank kept at its end (StageWork's
  // transient_peak_bytes): it counts for the peak, not as a sample of the timeline.
  void note_peak(double bytes) { peak_ = std::max(peak_, bytes); }
  double live() const { return live_; }
  double peak() const { return peak_; }
  const std::vector<MemorySample>& samples() const { return samples_; }

 private:
  int rank_;
  double live_ = 0, peak_ = 0;
  std::vector<MemorySample> samples_;
};

}  // namespace ppbench
