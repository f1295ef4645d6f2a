#include "workloads/workload_options.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "core/error.h"
#include "workloads/amoebanet.h"
#include "workloads/mlp.h"
#include "workloads/shape_check.h"
#include "workloads/transformer.h"

namespace ppbench {

namespace {

struct ShapeFlag {
  const char* name;
  const char* help;
};

constexpr ShapeFlag kShapeFlags[] = {
    {"--layers",
     "mlp: linear layers incl. the loss head (default 8); amoebanet: normal cells L, "
     "a multiple of 3 (default 18); transformer: decoder layers (default: preset)"},
    {"--width", "mlp: hidden features (default 1024)"},
    {"--input-dim", "mlp: input features (default: --width)"},
    {"--classes", "mlp: classes (default 10); amoebanet: classes (default 1000)"},
    {"--filters", "amoebanet: filter size D, a multiple of 8 (default 256)"},
    {"--image-size",
     "amoebanet: image height = width, a multiple of 32, 64 or more at micro-batch 1 (default "
     "224)"},
    {"--hidden", "transformer: model dimension h"},
    {"--ffn", "transformer: feed-forward dimension"},
    {"--heads", "transformer: attention (query) heads, dividing --hidden"},
    {"--kv-heads", "transformer: key/value heads, dividing --heads"},
    {"--vocab", "transformer: vocabulary size"},
    {"--seq", "transformer: sequence length"},
};

const std::map<std::string, std::vector<std::string>>& flags_of() {
  static const std::map<std::string, std::vector<std::string>> m = {
      {"mlp", {"--layers", "--width", "--input-dim", "--classes"}},
      {"amoebanet", {"--layers", "--filters", "--image-size", "--classes"}},
      {"transformer",
       {"--preset", "--layers", "--hidden", "--ffn", "--heads", "--kv-heads", "--vocab", "--seq"}},
  };
  return m;
}

// A decimal integer that fits in 64 bits, rewritten without leading zeros (CLI11 alone reads 010
// as octal and saturates 99999999999999999999 to 2^63 - 1). Whether it is allowed is the
// builders' to say.
CLI::Validator int64_flag() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::string_view text = value;
        if (text.size() > 1 && text.front() == '+' && text[1] != '-') text.remove_prefix(1);
        int64_t v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
        if (text.empty() || end != text.data() + text.size() ||
            (ec != std::errc() && ec != std::errc::result_out_of_range))
          return quoted(value) + " is not an integer (allowed: a decimal integer)";
        if (ec == std::errc::result_out_of_range)
          return value + " is too large (allowed: a positive integer up to 9223372036854775807)";
        value = std::to_string(v);
        return "";
      },
      "INT", "int64");
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Every layer's figures fit in 64 bits (Size in the builders); their sums must too.
WorkloadSpec checked_totals(WorkloadSpec spec) {
  static_cast<void>(spec.params());
  static_cast<void>(spec.activation());
  static_cast<void>(spec.paper_activation());
  for (const LayerSpec& l : spec.layers) static_cast<void>(l.boundary_bytes());
  return spec;
}

}  // namespace

void WorkloadFlags::add_to(CLI::App& app, const std::string& default_dtype) {
  dtype = default_dtype;
  app.add_option("-w,--workload", workload, "Workload: mlp, amoebanet or transformer")->required();
  preset_option_ = app.add_option("--preset", preset,
                                  "transformer: llama3-8b (default), gpipe-transformer, "
                                  "tiny-llama, tiny-gpipe; shape flags override it");
  for (const auto& f : kShapeFlags) {
    values[f.name] = 0;
    options_[f.name] = app.add_option(f.name, values[f.name], f.help)->transform(int64_flag());
  }
  microbatch_option_ = app.add_option("-b,--microbatch-size", microbatch_size,
                                      "Samples per micro-batch b (default 1)")
                           ->transform(int64_flag());
  app.add_option("--dtype", dtype,
                 "Activation/parameter type: bf16, f32, f64 (default " + default_dtype + ")");
}

bool WorkloadFlags::given(const std::string& flag) const {
  if (flag == "--preset") return preset_option_ && preset_option_->count() > 0;
  auto it = options_.find(flag);
  return it != options_.end() && it->second->count() > 0;
}

std::string WorkloadFlags::describe() const {
  std::string s = "--workload " + workload;
  if (given("--preset")) s += " --preset " + preset;
  for (const auto& f : kShapeFlags)
    if (given(f.name)) s += std::string(" ") + f.name + " " + std::to_string(values.at(f.name));
  if (microbatch_option_ && microbatch_option_->count() > 0)
    s += " --microbatch-size " + std::to_string(microbatch_size);
  return s;
}

double WorkloadFlags::layer_count() const {
  auto value = [&](const char* flag, int64_t fallback) {
    return static_cast<double>(given(flag) ? values.at(flag) : fallback);
  };
  if (workload == "mlp") return value("--layers", MlpConfig{}.layers);
  if (workload == "amoebanet") return value("--layers", AmoebaNetConfig{}.layers) + 6;
  if (workload != "transformer") return 0;
  try {
    return value("--layers", transformer_preset(preset).layers) + 2;
  } catch (const UsageError&) {
    return value("--layers", 0) + 2;  // an unknown preset: build() names it
  }
}

WorkloadSpec WorkloadFlags::build() const {
  try {
    return build_checked();
  } catch (const SizeOverflow& e) {
    throw UsageError(describe() + ": " + e.what() + "; use smaller shapes");
  }
}

WorkloadSpec WorkloadFlags::build_checked() const {
  auto known = flags_of().find(workload);
  if (known == flags_of().end())
    throw UsageError("unknown --workload " + quoted(workload) +
                     " (known: amoebanet, mlp, transformer)");
  const auto& allowed = known->second;
  std::vector<std::string> all(allowed);
  all.push_back("--preset");
  for (const auto& f : kShapeFlags) all.push_back(f.name);
  for (const auto& f : all) {
    if (given(f) && std::find(allowed.begin(), allowed.end(), f) == allowed.end())
      throw UsageError(f + " does not apply to --workload " + workload +
                       " (its options: " + join(allowed) + ")");
  }
  const DType dt = parse_dtype(dtype);
  auto value = [&](const char* flag, int64_t fallback) {
    return given(flag) ? values.at(flag) : fallback;
  };

  if (workload == "mlp") {
    MlpConfig c;
    c.layers = value("--layers", c.layers);
    c.width = value("--width", c.width);
    // 0 means "as --width" inside; given, it must be a real size.
    if (given("--input-dim")) require_positive("--input-dim", values.at("--input-dim"));
    c.input_dim = value("--input-dim", c.input_dim);
    c.classes = value("--classes", c.classes);
    return checked_totals(build_mlp(c, microbatch_size, dt));
  }
  if (workload == "amoebanet") {
    AmoebaNetConfig c;
    c.layers = value("--layers", c.layers);
    c.filters = value("--filters", c.filters);
    c.image_size = value("--image-size", c.image_size);
    c.classes = value("--classes", c.classes);
    return checked_totals(build_amoebanet(c, microbatch_size, dt));
  }
  TransformerConfig c = transformer_preset(preset);
  c.layers = value("--layers", c.layers);
  c.hidden = value("--hidden", c.hidden);
  c.ffn = value("--ffn", c.ffn);
  c.heads = value("--heads", c.heads);
  // The GPipe style is plain multi-head attention: its key/value heads follow --heads.
  c.kv_heads = value("--kv-heads", c.style == TransformerStyle::kGpt ? c.heads : c.kv_heads);
  if (given("--heads") && !given("--kv-heads") && c.heads > 0 && c.kv_heads > 0 &&
      c.heads % c.kv_heads != 0)
    throw UsageError("--heads " + std::to_string(c.heads) + " is not a multiple of the " +
                     std::to_string(c.kv_heads) + " key/value heads of --preset " + preset +
                     " (each serves a whole group); give --kv-heads too, dividing --heads");
  c.vocab = value("--vocab", c.vocab);
  c.seq = value("--seq", c.seq);
  return checked_totals(build_transformer(c, microbatch_size, dt));
}

}  // namespace ppbench
