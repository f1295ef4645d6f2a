// Fuzz target: the values ppbench reads out of flags and system files, each by its own parser.
// Byte 0 picks the parser; the rest is the text.
//
//   0 --max-memory (parse_byte_size): refused with UsageError only; what it accepts is a whole
//     number of bytes in [1, 2^63] that reads back unchanged from its own decimal digits.
//   1 /proc/meminfo (meminfo_available_bytes): never throws, a finite count >= 0 (0: not there).
//   2 --cost (parse_cost_spec, then resolve): UsageError only; the resolved costs are finite, > 0,
//     at most three times the cost model's bound (FB = F + I + W at most), with B = I + W and FB =
//     F + B where not given.
//   3 an action of the text form (parse_action): UsageError only; what it accepts prints
//     (to_string) as text that parses back to the same action.
//   4 --gpus (parse_gpu_list): UsageError only; an accepted list is non-empty, without
//     negative or repeated ordinals.
//   5 --partition as layer counts (explicit_partition), with layers and stages from bytes 1-2:
//     UsageError only; an accepted list has one count >= 1 per stage, summing to the layers.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "harness/cost_model.h"
#include "harness/cuda/gpu_placement.h"
#include "harness/memory_estimate.h"
#include "schedules/action.h"
#include "tests/fuzz/fuzz_target.h"
#include "workloads/partition.h"

namespace ppbench::fuzz {
namespace {

void byte_size(std::string_view text) {
  double bytes = 0;
  try {
    bytes = parse_byte_size(text);
  } catch (const UsageError&) {
    return;
  }
  fuzz_check(bytes >= 1 && bytes <= 9.2e18 && bytes == std::floor(bytes),
             "parse_byte_size accepted " + std::to_string(bytes));
  char digits[32];
  std::snprintf(digits, sizeof digits, "%.0f", bytes);
  fuzz_check(parse_byte_size(digits) == bytes,
             "parse_byte_size does not read back " + std::string(digits));
}

void meminfo(std::string_view text) {
  const double available = meminfo_available_bytes(text);
  fuzz_check(std::isfinite(available) && available >= 0,
             "meminfo_available_bytes gave " + std::to_string(available));
}

void cost(std::string_view text) {
  CostSpec spec;
  StageCost c;
  try {
    spec = parse_cost_spec(text);
    c = resolve(spec, 0);
  } catch (const UsageError&) {
    return;
  }
  for (double v : {c.f, c.b, c.i, c.w, c.fb})
    fuzz_check(std::isfinite(v) && v > 0 && v <= 3 * kMaxCost,
               "--cost resolved to a time out of bounds: " + std::to_string(v));
  fuzz_check(std::fabs(c.b - (c.i + c.w)) <= 1e-8 * c.b, "--cost resolved to B != I + W");
  if (!spec.has_fb)
    fuzz_check(std::fabs(c.fb - (c.f + c.b)) <= 1e-8 * c.fb, "--cost resolved to FB != F + B");
  fuzz_check(c.fb >= std::max(c.f, c.b), "--cost resolved to FB below its longer half");
}

void action(std::string_view text) {
  Action a;
  try {
    a = parse_action(text);
  } catch (const UsageError&) {
    return;
  }
  const std::string printed = to_string(a);
  fuzz_check(parse_action(printed) == a, "action " + printed + " does not read back");
}

void gpu_list(std::string_view text) {
  std::vector<int> gpus;
  try {
    gpus = parse_gpu_list(text);
  } catch (const UsageError&) {
    return;
  }
  fuzz_check(!gpus.empty(), "--gpus accepted an empty list");
  fuzz_check(std::all_of(gpus.begin(), gpus.end(), [](int g) { return g >= 0; }),
             "--gpus accepted a negative ordinal");
  fuzz_check(std::set<int>(gpus.begin(), gpus.end()).size() == gpus.size(),
             "--gpus accepted a GPU twice");
}

void partition_counts(std::string_view rest) {
  if (rest.size() < 2) return;
  const int layers = static_cast<unsigned char>(rest[0]);
  const int stages = 1 + static_cast<unsigned char>(rest[1]) % 16;
  std::vector<int> counts;
  try {
    counts = explicit_partition(rest.substr(2), layers, stages);
  } catch (const UsageError&) {
    return;
  }
  fuzz_check(static_cast<int>(counts.size()) == stages, "--partition gave another stage count");
  fuzz_check(std::all_of(counts.begin(), counts.end(), [](int n) { return n >= 1; }),
             "--partition accepted an empty stage");
  long long sum = 0;
  for (int n : counts) sum += n;
  fuzz_check(sum == layers, "--partition's counts do not sum to the layers");
}

}  // namespace
}  // namespace ppbench::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ppbench::fuzz;
  // In the order of the list at the top of this file.
  static constexpr void (*kParsers[])(std::string_view) = {byte_size, meminfo,  cost,
                                                           action,    gpu_list, partition_counts};
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  kParsers[data[0] % std::size(kParsers)](text);
  return 0;
}
