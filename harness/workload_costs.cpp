#include "harness/workload_costs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace ppbench {

PassBytes layer_bytes(const WorkloadSpec& spec, std::size_t layer) {
  const LayerSpec& l = spec.layers.at(layer);
  const double weights = static_cast<double>(l.params) * dtype_bytes(spec.dtype);
  const double in =
      static_cast<double>(layer == 0 ? spec.input.bytes : spec.layers[layer - 1].boundary_bytes());
  const double out = static_cast<double>(l.boundary_bytes());
  const double mb = static_cast<double>(l.activation.b), mw = static_cast<double>(l.activation.w);
  return {weights + in + out + mb, weights + out + mb + (layer == 0 ? 0 : in), mw + 2 * weights};
}

double roofline_time(double flops, double bytes, const DeviceRates& r) {
  return std::max(flops / r.peak_flops, bytes / r.memory_bandwidth);
}

std::vector<StageCost> stage_costs(const WorkloadSpec& spec, const PartitionPlan& plan,
                                   const DeviceProfile& profile) {
  if (profile.kind == "measured") {
    if (profile.stages.size() != plan.stages.size())
      throw std::invalid_argument("measured profile has " + std::to_string(profile.stages.size()) +
                                  " stages, the partition " + std::to_string(plan.stages.size()));
    std::vector<StageCost> out = profile.stages;
    // The cost model charges a pair F of its forward stage + B of its backward stage, less the
    // forward stage's F + B - FB: where the pairs carried another stage's backward, FB is moved
    // by the two backwards' difference, so that the pair costs what it was measured to.
    for (std::size_t s = 0; s < out.size() && s < profile.fb_backward.size(); ++s)
      if (const PairedBackward& with = profile.fb_backward[s]; with.stage >= 0) {
        const StageCost& other = profile.stages.at(static_cast<std::size_t>(with.stage));
        out[s].fb =
            profile.stages[s].fb + profile.stages[s].b - (with.op == Op::I ? other.i : other.b);
      }
    return out;
  }
  std::vector<StageCost> out;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const StageSpec& st = plan.stages[s];
    StageCost c;
    c.f = c.i = c.w = 0;
    for (int l = st.first_layer; l < st.first_layer + st.num_layers; ++l) {
      const LayerSpec& layer = spec.layers[static_cast<std::size_t>(l)];
      const PassBytes bytes = layer_bytes(spec, static_cast<std::size_t>(l));
      c.f += roofline_time(layer.flops.f, bytes.f, profile.rates);
      c.i += roofline_time(layer.flops.i, bytes.i, profile.rates);
      c.w += roofline_time(layer.flops.w, bytes.w, profile.rates);
    }
    c.b = c.i + c.w;
    c.fb = c.f + c.b;
    c.comm = s + 1 < plan.stages.size()
                 ? static_cast<double>(st.boundary_bytes_out) / profile.rates.link_bandwidth +
                       profile.rates.link_latency
                 : 0;
    // Rates the profile checks allow (any positive number) can still be too small for a stage's
    // work: a time past the cost model's bound (or a double's) is the profile's fault, said as
    // such, not the simulator's.
    for (const double t : {c.f, c.i, c.w, c.comm})
      if (!(t <= kMaxCost)) {
        char rates[160];
        std::snprintf(rates, sizeof rates, "peak_flops %g, memory_bandwidth %g, link_bandwidth %g",
                      profile.rates.peak_flops, profile.rates.memory_bandwidth,
                      profile.rates.link_bandwidth);
        throw UsageError("--device-profile's rates (" + std::string(rates) + ") make stage " +
                         std::to_string(s) + "'s time longer than " +
                         std::to_string(static_cast<long long>(kMaxCost)) +
                         " s (allowed: rates under which every pass takes at most that)");
      }
    out.push_back(c);
  }
  return out;
}

void go_by_rendezvous(std::vector<StageCost>& parts, const PartitionPlan& plan, double eager_limit,
                      double handshake) {
  for (std::size_t s = 0; s + 1 < parts.size(); ++s)
    if (static_cast<double>(plan.stages.at(s).boundary_bytes_out) > eager_limit) {
      parts[s].rendezvous = true;
      parts[s].handshake = handshake;
    }
}

CostModel schedule_cost_model(const Placement& placement, const std::vector<StageCost>& parts) {
  std::vector<StageCost> stages;
  for (int s = 0; s < placement.stages(); ++s)
    stages.push_back(parts.at(static_cast<std::size_t>(placement.part(s))));
  return CostModel(std::move(stages));
}

int bounding_stage(const std::vector<StageCost>& parts) {
  int best = 0;
  for (std::size_t s = 1; s < parts.size(); ++s)
    if (parts[s].f + parts[s].b > parts[best].f + parts[best].b) best = static_cast<int>(s);
  return best;
}

}  // namespace ppbench
