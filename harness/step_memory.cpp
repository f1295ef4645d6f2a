#include "harness/step_memory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/error.h"
#include "harness/backends/run_record.h"

namespace ppbench {

namespace {

[[noreturn]] void overflows(const char* what) {
  throw UsageError(std::string("the ") + what + " bytes overflow 64 bits: use a smaller workload");
}

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) overflows(what);
  return out;
}

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) overflows(what);
  return out;
}

// predicted_peak_bytes() sums int64 byte counts in a double: exact below 2^53, and a bound
// past it (such sizes are refused as overflow anyway once they reach 2^63).
int64_t whole_bytes(double v, const char* what) {
  if (!(v >= 0) || v >= 9.2e18)
    throw UsageError(std::string("the ") + what +
                     " bytes overflow 64 bits: use a smaller workload");
  return std::llround(v);
}

}  // namespace

ParameterBytes parameter_bytes(DType dtype, Optimizer optimizer, bool fp32_gradients) {
  const int64_t e = dtype_bytes(dtype);
  ParameterBytes b;
  b.param = e;
  // In the parameters' dtype (no separate fp32 accumulation buffer), unless the layers
  // accumulate them in fp32.
  b.grad = fp32_gradients ? std::max<int64_t>(e, 4) : e;
  if (optimizer == Optimizer::kNone) return b;
  // bf16 updates would round small steps away, so either optimizer steps an fp32 master copy.
  b.master = dtype == DType::kBF16 ? 4 : 0;
  // AdamW's moments at fp32 at least: bf16 moments lose its small updates; f64 keeps f64.
  const int64_t moment = optimizer == Optimizer::kAdamW ? std::max<int64_t>(e, 4) : 0;
  b.optimizer = 2 * moment + b.master;
  return b;
}

int64_t StepMemory::largest_total() const {
  int64_t m = 0;
  for (const RankMemory& r : ranks) m = std::max(m, r.total());
  return m;
}

StepMemory step_memory(const WorkloadSpec& spec, const Schedule& s, const PartitionPlan& plan,
                       const StepMemoryOptions& o) {
  const Placement& p = s.placement;
  const std::vector<double> peaks = predicted_peak_bytes(s, plan, o.recompute);
  const int capacity = resolve_channel_capacity(o.channel_capacity, s);

  StepMemory out;
  out.per_param = parameter_bytes(spec.dtype, o.optimizer, o.fp32_gradients);
  out.ranks.resize(static_cast<std::size_t>(p.ranks));
  for (int stage = 0; stage < p.stages(); ++stage) {
    RankMemory& r = out.ranks[static_cast<std::size_t>(p.stage_rank[stage])];
    const int part = p.part(stage);
    r.stages.push_back(stage);
    r.parts.push_back(part);
    r.param_count = checked_add(r.param_count, plan.stages[part].params, "parameter");
  }

  for (int rank = 0; rank < p.ranks; ++rank) {
    RankMemory& r = out.ranks[static_cast<std::size_t>(rank)];
    r.params = checked_mul(r.param_count, out.per_param.param, "parameter");
    r.grads = checked_mul(r.param_count, out.per_param.grad, "gradient");
    r.optimizer = checked_mul(r.param_count, out.per_param.optimizer, "optimizer state");
    r.activations = whole_bytes(peaks[static_cast<std::size_t>(rank)], "activation");

    // Messages this rank sends, per destination: how many and the largest. F sends its part's
    // output to the next stage; B or I sends the gradient of its input (the previous part's
    // output, same shape) back. Stages on the same rank hand over without a message.
    struct Link {
      int64_t messages = 0;
      int64_t largest = 0;
    };
    std::map<int, Link> links;
    auto send = [&](int to_stage, int64_t bytes) {
      const int dst = p.stage_rank[to_stage];
      if (dst == rank) return;
      Link& l = links[dst];
      ++l.messages;
      l.largest = std::max(l.largest, bytes);
    };
    auto visit = [&](const Task& t) {
      if (t.op == Op::F && !p.is_last(t.stage))
        send(t.stage + 1, plan.stages[p.part(t.stage)].boundary_bytes_out);
      if ((t.op == Op::B || t.op == Op::I) && !p.is_first(t.stage))
        send(t.stage - 1, plan.stages[p.part(t.stage - 1)].boundary_bytes_out);
    };
    for (const Action& a : s.ranks[static_cast<std::size_t>(rank)]) {
      visit(a.task);
      if (a.paired()) visit(a.partner);
    }
    for (const auto& [dst, l] : links) {
      // The mailbox's `capacity` messages, and one more the sender holds while it waits for room.
      const int64_t held = std::min<int64_t>(l.messages, int64_t{capacity} + 1);
      r.comm = checked_add(r.comm, checked_mul(held, l.largest, "communication"), "communication");
    }
    // total() adds the five unchecked: prove here that it fits.
    const int64_t weights =
        checked_add(checked_add(r.params, r.grads, "total"), r.optimizer, "total");
    checked_add(checked_add(weights, r.activations, "total"), r.comm, "total");
  }
  RankMemory& sum = out.sum;
  for (const RankMemory& r : out.ranks) {
    sum.param_count = checked_add(sum.param_count, r.param_count, "summed parameter");
    sum.params = checked_add(sum.params, r.params, "summed parameter");
    sum.grads = checked_add(sum.grads, r.grads, "summed gradient");
    sum.optimizer = checked_add(sum.optimizer, r.optimizer, "summed optimizer state");
    sum.activations = checked_add(sum.activations, r.activations, "summed activation");
    sum.comm = checked_add(sum.comm, r.comm, "summed communication");
    checked_add(checked_add(checked_add(sum.params, sum.grads, "summed total"), sum.optimizer,
                            "summed total"),
                checked_add(sum.activations, sum.comm, "summed total"), "summed total");
  }
  return out;
}

}  // namespace ppbench
