// The optimizer step that ends a training step (run) and whose states `ppbench memory` counts (`run
// --optimizer none|sgd|adamw`): which one, and its hyper-parameters. AdamW follows PyTorch's
// torch.optim.AdamW (decoupled weight decay, bias-corrected moments, epsilon added to the corrected
// second moment's square root); SGD is plain, without momentum. The moments are kept in the run's
// dtype.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ppbench {

struct OptimizerOptions {
  enum class Kind { kNone, kSgd, kAdamW };
  Kind kind = Kind::kNone;
  double lr = 1e-3;
  double weight_decay = 0.01;  // adamw only
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;

  bool enabled() const { return kind != Kind::kNone; }
};

std::string to_string(OptimizerOptions::Kind kind);
// "none", "sgd" or "adamw"; throws UsageError naming the value otherwise.
OptimizerOptions::Kind parse_optimizer(std::string_view name);
// The record's "optimizer": {"name", "lr", ...}.
nlohmann::json optimizer_json(const OptimizerOptions& o);

}  // namespace ppbench
