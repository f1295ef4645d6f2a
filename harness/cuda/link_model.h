// An emulated link between virtual devices of one GPU: a device-to-device copy inside one GPU
// is far faster than NVLink or PCIe between GPUs, so `--link-bandwidth GB/s` and
// `--link-latency us` delay each hand-over to what a real link would take:
// latency + bytes / bandwidth. GB/s is decimal (1e9 bytes/s), as NVLink and PCIe are quoted.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace ppbench {

struct LinkModel {
  double bandwidth_gb_per_s = 0;  // 0: unlimited (latency only)
  double latency_us = 0;

  // Seconds a transfer of `bytes` takes on this link.
  double transfer_seconds(std::size_t bytes) const;
  std::string describe() const;  // "50 GB/s, 2 us" for records
};

// No link model when neither flag is given (copies run at the GPU's own speed); a missing
// flag means no latency or unlimited bandwidth. Throws UsageError naming the flag and value
// when the bandwidth is not a positive finite number or the latency is negative or not finite.
std::optional<LinkModel> make_link_model(std::optional<double> bandwidth_gb_per_s,
                                         std::optional<double> latency_us);

}  // namespace ppbench
