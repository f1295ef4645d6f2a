#include "harness/cuda/link_model.h"

#include <cmath>
#include <sstream>

#include "core/error.h"

namespace ppbench {

namespace {

std::string number(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

}  // namespace

double LinkModel::transfer_seconds(std::size_t bytes) const {
  const double wire =
      bandwidth_gb_per_s > 0 ? static_cast<double>(bytes) / (bandwidth_gb_per_s * 1e9) : 0.0;
  return latency_us * 1e-6 + wire;
}

std::string LinkModel::describe() const {
  return (bandwidth_gb_per_s > 0 ? number(bandwidth_gb_per_s) + " GB/s" : "unlimited bandwidth") +
         ", " + number(latency_us) + " us";
}

std::optional<LinkModel> make_link_model(std::optional<double> bandwidth_gb_per_s,
                                         std::optional<double> latency_us) {
  if (!bandwidth_gb_per_s && !latency_us) return std::nullopt;
  LinkModel m;
  if (bandwidth_gb_per_s) {
    const double b = *bandwidth_gb_per_s;
    if (!std::isfinite(b) || b <= 0)
      throw UsageError("--link-bandwidth must be a positive number of GB/s, got " + number(b));
    m.bandwidth_gb_per_s = b;
  }
  if (latency_us) {
    const double l = *latency_us;
    if (!std::isfinite(l) || l < 0)
      throw UsageError("--link-latency must be a non-negative number of microseconds, got " +
                       number(l));
    m.latency_us = l;
  }
  return m;
}

}  // namespace ppbench
