// What LayerNorm, RMSNorm and BatchNorm keep between their passes, shared as
// the CPU norms share it (workloads/cpu/normalize.h): F keeps xhat and the
// per-row (or per-channel) 1/std; I reduces the gamma/beta gradients into f32
// [C] vectors and frees the statistics; W adds those vectors into the
// gradients and empties Saved. RMSNorm leaves the beta slot empty (0 bytes).
#pragma once

#include <utility>

#include "workloads/cuda/layer.h"
#include "workloads/cuda/reduce.h"

namespace ppbench::cuda::norm {

enum Slot { kXhat, kRstd, kDGamma, kDBeta, kSlots };

inline void save_stats(Saved& saved, const Shape& in_shape, DTensor xhat, DTensor rstd) {
  saved.clear();
  saved.in_shape = in_shape;
  saved.t.resize(kSlots);
  saved.t[kXhat] = std::move(xhat);
  saved.t[kRstd] = std::move(rstd);
}

// After I: keep only the reduced parameter gradients (dbeta may be empty).
inline void keep_param_grads(Saved& saved, DTensor dgamma, DTensor dbeta = {}) {
  saved.t[kDGamma] = std::move(dgamma);
  saved.t[kDBeta] = std::move(dbeta);
  saved.t[kXhat].release();
  saved.t[kRstd].release();
}

// W: add the kept gradients into gamma (and beta), then free everything.
inline void add_param_grads(Context& ctx, Saved& saved, Param& gamma, Param* beta, std::int64_t c) {
  add_f32(ctx, gamma.grad.as<float>(), saved.t[kDGamma].as<float>(), c);
  if (beta != nullptr) add_f32(ctx, beta->grad.as<float>(), saved.t[kDBeta].as<float>(), c);
  saved.clear();
}

}  // namespace ppbench::cuda::norm
