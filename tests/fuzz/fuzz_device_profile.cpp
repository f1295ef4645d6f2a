// Fuzz target: a `--device-profile` file (harness/device_profile.h), any bytes, taken the way
// `ppbench simulate --device-profile` takes the text it read: parse_device_profile_text, the JSON
// parse with exceptions and then parse_device_profile.
//
// What must hold for every input:
//   - any bytes it cannot use (not JSON, a number past double's range, a JSON value that is no
//     profile) are refused with UsageError and nothing else: any other exception escapes here
//     and the fuzzer keeps the input as a crash;
//   - a profile it accepts has finite, positive rates or per-stage times within the cost model's
//     bounds, and describes itself for a report (to_json) without throwing.
// (read_device_profile's own part, the file's kind and size bound, is tested in
// tests/cli/test_simulate_workload_cli.py: the fuzzer hands over bytes, not files.)
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "harness/device_profile.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ppbench;
  using fuzz::fuzz_check;
  DeviceProfile p;
  try {
    p = parse_device_profile_text(std::string_view(reinterpret_cast<const char*>(data), size),
                                  "fuzz.json");
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
