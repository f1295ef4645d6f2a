// Fuzz target: a `--device-profile` file (harness/device_profile.h), any bytes.
//
// What must hold for every input:
//   - bytes that are not JSON are told apart without an exception (as read_device_profile does);
//   - parse_device_profile refuses any JSON value it cannot use with UsageError and nothing else;
//   - a profile it accepts has finite, positive rates or per-stage times within the cost model's
//     bounds, and describes itself for a report (to_json) without throwing.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "harness/device_profile.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ppbench;
  using fuzz::fuzz_check;
  const nlohmann::json j =
      nlohmann::json::parse(data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  DeviceProfile p;
  try {
    p = parse_device_profile(j, "fuzz.json");
  } catch (const UsageError&) {
    return 0;
  }
  auto fine = [](double v, bool zero_ok) { return std::isfinite(v) && (zero_ok ? v >= 0 : v > 0); };
  if (p.kind == "rates") {
    fuzz_check(fine(p.rates.peak_flops, false) && fine(p.rates.memory_bandwidth, false) &&
                   fine(p.rates.link_bandwidth, false) && fine(p.rates.link_latency, true),
               "a rates profile was accepted with a rate that is not finite and positive");
  } else {
    fuzz_check(p.kind == "measured", "a profile of kind '" + p.kind + "' was accepted");
    fuzz_check(!p.stages.empty(), "a measured profile was accepted without stages");
    for (const StageCost& c : p.stages)
      for (double v : {c.f, c.i, c.w, c.b, c.fb, c.comm})
        fuzz_check(fine(v, true) && v <= kMaxCost,
                   "a measured profile was accepted with a stage time out of bounds");
  }
  (void)to_json(p).dump();
  return 0;
}
