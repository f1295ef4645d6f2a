// The memory of one whole training step, per pipeline rank, modelled from the workload's spec,
// its partition and the schedule (`ppbench memory`; docs/metrics.md, "Memory of a whole step").
//
// Per rank, in bytes:
//   params       the parameters of every stage the rank holds, at the dtype. A rank holds one
//                part of the partition per schedule stage placed on it, so Chimera and DualPipe
//                (two chains) hold two copies of a part and both are counted; interleaved and V
//                shapes hold several different parts.
//   grads        one gradient per held parameter, at the same dtype as the parameters (the
//                convention of mixed-precision accounting, 2 + 2 + 12 bytes per parameter with
//                AdamW in bf16), or at fp32 where the layers accumulate them so (ppbench's CUDA
//                layers, cuda_step_memory.h).
//   optimizer    none: 0. sgd (plain SGD, no momentum) keeps no moments; adamw the two moments m
//                and v at fp32 (at f64 when training in f64). Under either, an fp32 master copy
//                of the parameters when the dtype is bf16. Every held copy has its own states.
//   activations  predicted_peak_bytes(): the most activation bytes alive at once under this
//                schedule; with --recompute F keeps only stage inputs, and the peak may be
//                midway through a backward, which first rebuilds its stage's M_B.
//   comm         the tensors in flight the rank sends: per destination rank, the (src, dst)
//                mailbox holds at most channel_capacity messages, and the sender holds one more
//                while it waits for room (never more than the step sends on that link), each
//                bounded by the largest activation or gradient sent on it. Charged to the
//                sender, which allocated them.
// Not modelled: framework and allocator overhead, fragmentation, CUDA context, workspace of the
// kernels, the data loader, and the transient working set of one layer at work.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "harness/optimizer.h"
#include "schedules/lower.h"
#include "schedules/schedule.h"
#include "workloads/layer_spec.h"
#include "workloads/partition.h"

namespace ppbench {

// The optimizer whose states are counted (harness/optimizer.h: none, sgd, adamw).
using Optimizer = OptimizerOptions::Kind;

// Bytes per held parameter of each per-parameter term, under the convention above.
struct ParameterBytes {
  int64_t param = 0;
  int64_t grad = 0;
  int64_t optimizer = 0;  // moments plus the master copy
  int64_t master = 0;     // of which the fp32 master copy (bf16 with sgd or adamw)
};
// `fp32_gradients`: gradients at fp32 whatever the dtype (at f64 where the dtype is f64).
ParameterBytes parameter_bytes(DType dtype, Optimizer optimizer, bool fp32_gradients = false);

struct StepMemoryOptions {
  Optimizer optimizer = Optimizer::kAdamW;
  bool recompute = false;
  int channel_capacity = 0;  // messages one (src, dst) mailbox holds; 0: resolve_channel_capacity
  bool fp32_gradients = false;  // parameter_bytes'
};

struct RankMemory {
  std::vector<int> stages;  // schedule stages on this rank
  std::vector<int> parts;   // the partition's stage (part) each of them runs
  int64_t param_count = 0;  // parameters held, every copy counted
  int64_t params = 0, grads = 0, optimizer = 0;
  int64_t activations = 0;  // predicted_peak_bytes(): the schedule's peak
  int64_t comm = 0;
  int64_t total() const { return params + grads + optimizer + activations + comm; }
};

struct StepMemory {
  ParameterBytes per_param;
  std::vector<RankMemory> ranks;
  RankMemory sum;  // param_count and every byte term summed over the ranks (no stages, parts)
  const char* model = "ppbench memory";  // the command that models the same, for records' notes
  int64_t largest_total() const;
};

// UsageError when a byte count would overflow 64 bits.
StepMemory step_memory(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
                       const StepMemoryOptions& o);

}  // namespace ppbench
