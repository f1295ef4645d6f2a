// Fuzz target: the workload shape flags (`--workload`, `--layers`, `--hidden`, ..., `-b`), parsed
// by the same CLI11 options every command registers (workloads/workload_options.h) and built into
// a WorkloadSpec, as `ppbench model` does.
//
// Input: byte 0 the workload (mlp, amoebanet, transformer), byte 1 the dtype, byte 2 the preset;
// then flags, each a byte naming the flag and its value: one byte below 0x80 as itself, else the
// next 8 bytes as a raw int64 (the boundaries of 64-bit arithmetic are where shapes overflow).
//
// What must hold for every input (under UBSan, which stops at any signed overflow):
//   - parsing and building refuse only with CLI11's parse errors or UsageError (exit 2);
//   - a spec that builds has finite, non-negative FLOPs and non-negative parameters, activation
//     and boundary bytes in every layer, and whole-model sums that do not overflow.
// Sizes the CLI would refuse before building (more layers than a memory estimate allows) are
// skipped the same way: by layer_count(), before build().
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "tests/fuzz/fuzz_target.h"
#include "workloads/layer_spec.h"
#include "workloads/workload_options.h"

namespace {

constexpr const char* kWorkloads[] = {"mlp", "amoebanet", "transformer"};
constexpr const char* kDtypes[] = {"f32", "bf16", "f64", "f16"};
constexpr const char* kPresets[] = {"llama3-8b", "gpipe-transformer", "tiny-llama", "tiny-gpipe",
                                    "gpt-9"};
constexpr const char* kFlags[] = {
    "--layers", "--width", "--input-dim", "--classes", "--filters", "--image-size",     "--hidden",
    "--ffn",    "--heads", "--kv-heads",  "--vocab",   "--seq",     "--microbatch-size"};
// Far above what a command builds (its memory estimate refuses more), far below what would make
// one input take seconds.
constexpr double kMaxLayers = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ppbench;
  using fuzz::fuzz_check;
  if (size < 3) return 0;
  std::vector<std::string> args = {"model", "--workload", kWorkloads[data[0] % 3], "--dtype",
                                   kDtypes[data[1] % 4]};
  if (data[2] % 6 < 5) args.insert(args.end(), {"--preset", kPresets[data[2] % 6]});
  for (std::size_t k = 3; k + 1 < size && args.size() < 64;) {
    const char* flag = kFlags[data[k] % std::size(kFlags)];
    std::int64_t value = data[k + 1];
    k += 2;
    if (value >= 0x80) {
      if (k + 8 > size) break;
      std::memcpy(&value, data + k, 8);
      k += 8;
    }
    args.insert(args.end(), {flag, std::to_string(value)});
  }

  CLI::App app;
  WorkloadFlags flags;
  flags.add_to(app);
  WorkloadSpec spec;
  try {
    // CLI11 takes the arguments in reverse order, the first at the back.
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
    app.parse(reversed);
    if (flags.layer_count() > kMaxLayers) return 0;
    spec = flags.build();
  } catch (const CLI::ParseError&) {
    return 0;
  } catch (const UsageError&) {
    return 0;
  }
  for (const LayerSpec& l : spec.layers) {
    fuzz_check(l.params >= 0, "layer " + l.name + " has negative parameters");
    for (double f : {l.flops.f, l.flops.i, l.flops.w})
      fuzz_check(std::isfinite(f) && f >= 0, "layer " + l.name + " has FLOPs " + std::to_string(f));
    fuzz_check(l.activation.b >= 0 && l.activation.w >= 0 && l.paper_activation.b >= 0 &&
                   l.paper_activation.w >= 0,
               "layer " + l.name + " has negative activation bytes");
    fuzz_check(l.boundary_bytes() >= 0, "layer " + l.name + " has negative boundary bytes");
  }
  fuzz_check(spec.params() >= 0, "the model's parameters sum below zero");
  fuzz_check(std::isfinite(spec.flops().total()), "the model's FLOPs are not finite");
  fuzz_check(spec.activation().b >= 0, "the model's activation bytes sum below zero");
  return 0;
}
