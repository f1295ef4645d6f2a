// What `simulate --workload` turns a workload's FLOPs and bytes into times with
// (docs/metrics.md, "Costs from a workload"). A profile is one of two kinds:
//
//   rates     a device's peak FLOP/s, memory bandwidth (bytes/s), link bandwidth (bytes/s) and
//             link latency (s); a layer's pass takes max(FLOPs / peak, bytes / bandwidth) (a
//             roofline), a stage boundary bytes / link bandwidth + latency.
//   measured  per-stage medians of F, I, W, B, FB and of the hand-over and the sender's send
//             call at each boundary, in seconds, as `run --profile-out FILE` writes them from a
//             measured step, with the workload, partition and provenance they were measured for.
//
// The file is one JSON object with "format": "ppbench-device-profile", "version": 1 and "kind"
// (docs/metrics.md lists every key). Without a file the built-in default_profile() is used.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cost_model.h"
#include "harness/trace.h"
#include "schedules/placement.h"
#include "workloads/layer_spec.h"
#include "workloads/partition.h"

namespace ppbench {

struct DeviceRates {
  double peak_flops = 0;        // FLOP/s
  double memory_bandwidth = 0;  // bytes/s
  double link_bandwidth = 0;    // bytes/s between adjacent ranks
  double link_latency = 0;      // s per transfer
};

// The backward half of a stage's overlapped pairs: stage -1 where it is the stage's own B.
struct PairedBackward {
  int stage = -1;
  Op op = Op::B;
};

struct DeviceProfile {
  std::string kind;    // "rates" or "measured"
  std::string name;    // what the profile says it describes
  std::string source;  // "built-in default" or the file's path
  DeviceRates rates;   // kind "rates"; kind "measured": link_latency only (0 unless given)
  // kind "measured": per partition stage, seconds; comm is the hand-over to the next stage and
  // send each send call's span across that boundary (0 where the profile has none).
  std::vector<StageCost> stages;
  // kind "measured": per partition stage, the backward half its overlapped pairs carried where
  // not its own B (a V shape pairs a forward of one stage with a backward of another); FB is the
  // pairs' time either way, which stage_costs turns into the cost model's terms.
  std::vector<PairedBackward> fb_backward;
  // kind "measured", where the run stepped an optimizer: per partition stage, the median time of
  // its update (s), which `simulate` places after the stage's last backward. Empty: none.
  std::vector<double> optimizer;
  // kind "measured": what the times were measured for (workload, workload_config,
  // microbatch_size, dtype, layer_counts), checked against the simulated workload.
  nlohmann::json measured_for;
};

// A CPU-class device (one socket's cores running Eigen, ranks as threads sharing its memory):
// 100 GFLOP/s, 20 GB/s memory, 10 GB/s and 10 us between ranks. Round figures of the order a
// 2020s server core group reaches, not a measurement: measure one with `run --profile-out`.
DeviceProfile default_profile();

// Parses a profile read from `source` (for messages). UsageError, one line naming the file and
// the key, for a missing or ill-typed key, a number that is not finite and > 0 (>= 0 for
// latencies and hand-overs), an unknown kind, format or version.
DeviceProfile parse_device_profile(const nlohmann::json& j, const std::string& source);
// The text of a profile as read from `source`: JSON parsed (UsageError naming the source for
// bytes that are not JSON or a number past double's range), then parse_device_profile.
DeviceProfile parse_device_profile_text(std::string_view text, const std::string& source);
// A profile is a few keys per stage: any real one is far below this, and the bound keeps a
// mistaken path (a log, a dump) from being read into memory whole.
inline constexpr std::uintmax_t kMaxDeviceProfileBytes = std::uintmax_t{16} << 20;
// Reads and parses FILE: UsageError naming it when it is missing, not a regular file (a device
// such as /dev/zero, a FIFO, a directory), over kMaxDeviceProfileBytes, unreadable or not a
// profile (parse_device_profile_text).
DeviceProfile read_device_profile(const std::string& path);

// The profile's description for reports (kind, name, source and its rates or its provenance).
nlohmann::json to_json(const DeviceProfile& p);

// How a measured profile sums up one op's times over a step: the median (the default) is what
// a typical action took, deaf to a stalled one; the mean is what the step spent on average, as
// the replay charges it, and the better guess of a step whose action times are skewed (ranks
// sharing cores, docs/over-tcp.md).
enum class ProfileStatistic { kMedian, kMean };

// Its name, "median" or "mean", and back (UsageError naming anything else).
const char* statistic_name(ProfileStatistic statistic);
ProfileStatistic profile_statistic(const std::string& name);

// A measured profile from a step's trace (seconds): per partition stage (copies of a stage on
// several chains pooled) the `statistic` of each op's durations, I = W = B/2 where the backward
// was not split, B = I + W where it was, FB = F + B without overlapped pairs; the hand-over of
// each boundary that of the activations sent down it and the gradients sent up it (0 when no
// transfer crossed ranks there); where the step ran optimizer updates, each stage's update time
// as "optimizer". `identity` carries workload, workload_config, microbatch_size, dtype and
// provenance from the run's record.
nlohmann::json measured_profile_json(const Trace& trace, const Placement& placement,
                                     const PartitionPlan& plan, const nlohmann::json& identity,
                                     ProfileStatistic statistic = ProfileStatistic::kMedian);

}  // namespace ppbench
