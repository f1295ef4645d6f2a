// The workload flags every command that builds a workload shares (`ppbench model`, and later
// `ppbench run`), so they are spelled and checked the same way everywhere:
//   --workload mlp|amoebanet|transformer, --microbatch-size b, --dtype bf16|f32|f64
//   mlp:         --layers, --width, --input-dim, --classes
//   amoebanet:   --layers (L), --filters (D), --image-size, --classes
//   transformer: --preset, then --layers, --hidden, --ffn, --heads, --kv-heads, --vocab, --seq
// A flag of another workload is a UsageError, not silently ignored.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "workloads/layer_spec.h"

namespace ppbench {

struct WorkloadFlags {
  std::string workload;
  std::string preset = "llama3-8b";
  int64_t microbatch_size = 1;
  std::string dtype = "f32";
  // Shape flags by name ("--layers"), 0 until given.
  std::map<std::string, int64_t> values;

  // Registers the flags; `default_dtype` is this command's default for --dtype.
  void add_to(CLI::App& app, const std::string& default_dtype = "f32");
  // Builds the spec; UsageError for an unknown workload or preset, a flag of another workload,
  // or a bad shape.
  WorkloadSpec build() const;
  bool given(const std::string& flag) const;
  // The flags as given, for messages: "--workload mlp --layers 8 --width 4096".
  std::string describe() const;
  // How many layers build() will make (from the flags alone, so a command can bound its memory
  // before building); 0 for an unknown workload or preset.
  double layer_count() const;

 private:
  WorkloadSpec build_checked() const;
  std::map<std::string, CLI::Option*> options_;
  CLI::Option* preset_option_ = nullptr;
  CLI::Option* microbatch_option_ = nullptr;
};

}  // namespace ppbench
