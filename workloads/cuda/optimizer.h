// The optimizer's element-wise updates on the device: the GPU mirror of workloads/cpu/optimizer.h,
// same formulas in the same order (PyTorch's torch.optim.SGD without momentum and AdamW). The
// parameters are bf16 or f32 (the layer dtype), their gradients always f32 (dtype.h), AdamW's
// moments f32. A bf16 parameter is stepped on an f32 master copy and rounded back, under SGD as
// under AdamW, as mixed-precision training does: its small updates would otherwise round away
// (an update below half a bf16 ulp, 2^-9 of the value, is lost on the bf16 value itself).
//
// AdamW's step counter lives on the device (AdamWCounter): adamw_begin_step advances it and
// computes the step's two bias-correction scalars there, so a CUDA graph captured once replays
// every later step with the right t, exactly as eager launches do.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "workloads/cuda/dtype.h"

namespace ppbench::cuda {

// The hyper-parameters (harness/optimizer.h's OptimizerOptions carry them; this header needs no
// harness).
struct AdamWHyper {
  double lr, weight_decay, beta1, beta2, eps;
};

// On the device: t (from 0, advanced to 1 by the first step) and the step's scalars, as the CPU
// kernel folds PyTorch's bias corrections: step = lr / (1 - beta1^t) and root = sqrt(1 - beta2^t),
// both computed in double and rounded to f32.
struct AdamWCounter {
  std::int64_t t;
  float step, root;
};

// p -= lr * g (p of `dtype`, n elements). With `master` (bf16 p) the step is taken on master
// and p = round(master); without, p must be f32.
void sgd_update(cudaStream_t stream, DType dtype, void* p, float* master, const float* g,
                std::int64_t n, double lr);

// counter->t += 1 and the scalars of that step, on `stream`.
void adamw_begin_step(cudaStream_t stream, AdamWCounter* counter, double beta1, double beta2,
                      double lr);

// One AdamW step at the counter's t: p *= 1 - lr * wd; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= step * m / (sqrt(v) / root + eps). With `master` (bf16 p),
// the step is taken on master and p = round(master); without, p must be f32.
void adamw_update(cudaStream_t stream, DType dtype, void* p, float* master, const float* g,
                  float* m, float* v, std::int64_t n, const AdamWHyper& h,
                  const AdamWCounter* counter);

// master[i] = p[i] widened to f32 (the master copy of bf16 parameters, made once).
void widen_to_f32(cudaStream_t stream, DType dtype, const void* p, float* master, std::int64_t n);

}  // namespace ppbench::cuda
