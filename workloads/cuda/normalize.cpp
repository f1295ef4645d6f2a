#include "workloads/cuda/normalize.h"

#include <utility>

#include "workloads/cuda/norm_saved.h"

namespace ppbench::cuda {

Norm::Norm(DeviceArena& params, std::string kind, const char* size_name, std::int64_t c,
           DType dtype, double eps, bool shift)
    : kind_(std::move(kind)), c_(c), dtype_(dtype), eps_(static_cast<float>(eps)), shift_(shift) {
  require(c > 0, kind_ + ": " + size_name + " must be positive");
  gamma = make_param(params, "gamma", {c}, dtype);
  upload(gamma.value, std::vector<float>(static_cast<std::size_t>(c), 1.0f));
  if (shift_) beta = make_param(params, "beta", {c}, dtype);  // zeroed by make_param
}

void Norm::backward_weight(Context& ctx, Saved& saved) {
  norm::add_param_grads(ctx, saved, gamma, shift_ ? &beta : nullptr, c_);
}

std::vector<Param*> Norm::params() {
  if (shift_) return {&gamma, &beta};
  return {&gamma};
}

}  // namespace ppbench::cuda
