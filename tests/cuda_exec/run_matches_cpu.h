// One check shared by the GPU executor's equivalence tests: run a step on the CUDA backend and
// compare its loss, its gradient norm and every parameter gradient, tensor by tensor (max
// relative error per tensor, tensors matched by name in the CPU layout), with the CPU backend's
// float64 single-device step of the same seed, within `tol`; with an optimizer, the same number
// of steps each followed by its update. Used by tests/cuda_exec and
// tests/cuda (AmoebaNet).
#pragma once

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "harness/backends/cpu/cpu_run.h"
#include "harness/cuda/cuda_run.h"

namespace ppbench {

// The run's output when it ran (whatever the comparison found), nullopt after a failure that
// threw (recorded with ADD_FAILURE, naming `label`).
inline std::optional<RunOutput> run_and_compare_with_cpu(const WorkloadSpec& spec,
                                                         const CudaRunOptions& o, double tol,
                                                         const std::string& label) {
  RunOutput out;
  CudaRunOptions keep = o;
  keep.run.keep_gradients = true;
  try {
    out = run_cuda(spec, keep);
  } catch (const std::exception& e) {
    ADD_FAILURE() << label << ": " << e.what();
    return std::nullopt;
  }
  // With an optimizer the compared gradients are the last step's, after every earlier step's
  // update: the reference takes as many steps (a graph run's warm-up is at least one step).
  const int eager = o.cuda_graph ? std::max(o.run.warmup, 1) : o.run.warmup;
  const int steps = o.run.optimizer.enabled() ? eager + o.run.steps : 1;
  const StepValues ref =
      single_device_step(spec, o.run.schedule.microbatches, o.run.seed, steps, o.run.optimizer);
  EXPECT_LE(std::abs(out.values.loss - ref.loss) / std::abs(ref.loss), tol)
      << label << ": loss gpu " << out.values.loss << " cpu " << ref.loss;
  EXPECT_LE(std::abs(out.values.grad_norm() - ref.grad_norm()) / ref.grad_norm(), tol)
      << label << ": gradient norm gpu " << out.values.grad_norm() << " cpu " << ref.grad_norm();
  const GradientComparison c = compare_gradients(out.values.tensors, ref.tensors);
  EXPECT_TRUE(c.mismatch.empty()) << label << ": " << c.mismatch;
  EXPECT_LE(c.max_rel_error, tol) << label << ": worst gradient tensor " << c.worst_tensor;
  EXPECT_EQ(c.tensors, ref.tensors.size()) << label;
  return out;
}

}  // namespace ppbench
