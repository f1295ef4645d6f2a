#include "harness/optimizer.h"

#include "core/error.h"

namespace ppbench {

std::string to_string(OptimizerOptions::Kind kind) {
  switch (kind) {
    case OptimizerOptions::Kind::kNone:
      return "none";
    case OptimizerOptions::Kind::kSgd:
      return "sgd";
    case OptimizerOptions::Kind::kAdamW:
      return "adamw";
  }
  return "?";
}

OptimizerOptions::Kind parse_optimizer(std::string_view name) {
  if (name == "none") return OptimizerOptions::Kind::kNone;
  if (name == "sgd") return OptimizerOptions::Kind::kSgd;
  if (name == "adamw") return OptimizerOptions::Kind::kAdamW;
  throw UsageError("--optimizer " + quoted(name) + " is not known (allowed: none, sgd, adamw)");
}

nlohmann::json optimizer_json(const OptimizerOptions& o) {
  nlohmann::json j = {{"name", to_string(o.kind)}};
  if (o.kind == OptimizerOptions::Kind::kNone) return j;
  j["lr"] = o.lr;
  if (o.kind == OptimizerOptions::Kind::kAdamW) {
    j["weight_decay"] = o.weight_decay;
    j["betas"] = {o.beta1, o.beta2};
    j["eps"] = o.eps;
  }
  return j;
}

}  // namespace ppbench
