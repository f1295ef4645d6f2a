#include "workloads/workload_options.h"

#include <algorithm>
#include <string>
#include <vector>

#include "schedules/error.h"
#include "workloads/amoebanet.h"
#include "workloads/mlp.h"
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
    {"--image-size", "amoebanet: image height = width, a multiple of 32 (default 224)"},
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

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
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
    options_[f.name] = app.add_option(f.name, values[f.name], f.help);
  }
  app.add_option("-b,--microbatch-size", microbatch_size, "Samples per micro-batch b (default 1)");
  app.add_option("--dtype", dtype,
                 "Activation/parameter type: bf16, f32, f64 (default " + default_dtype + ")");
}

bool WorkloadFlags::given(const std::string& flag) const {
  if (flag == "--preset") return preset_option_ && preset_option_->count() > 0;
  auto it = options_.find(flag);
  return it != options_.end() && it->second->count() > 0;
}

WorkloadSpec WorkloadFlags::build() const {
  auto known = flags_of().find(workload);
  if (known == flags_of().end())
    throw UsageError("unknown --workload '" + workload + "' (known: amoebanet, mlp, transformer)");
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
    c.input_dim = value("--input-dim", c.input_dim);
    c.classes = value("--classes", c.classes);
    return build_mlp(c, microbatch_size, dt);
  }
  if (workload == "amoebanet") {
    AmoebaNetConfig c;
    c.layers = value("--layers", c.layers);
    c.filters = value("--filters", c.filters);
    c.image_size = value("--image-size", c.image_size);
    c.classes = value("--classes", c.classes);
    return build_amoebanet(c, microbatch_size, dt);
  }
  TransformerConfig c = transformer_preset(preset);
  c.layers = value("--layers", c.layers);
  c.hidden = value("--hidden", c.hidden);
  c.ffn = value("--ffn", c.ffn);
  c.heads = value("--heads", c.heads);
  c.kv_heads = value("--kv-heads", c.kv_heads);
  c.vocab = value("--vocab", c.vocab);
  c.seq = value("--seq", c.seq);
  return build_transformer(c, microbatch_size, dt);
}

}  // namespace ppbench
