#include "harness/step_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "core/error.h"
#include "harness/backends/run_record.h"

namespace ppbench {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// What the byte counts grow with, as the flags that set them: the workload's shape (its spec's
// integer options, which are its flags' names), the micro-batch size and dtype, and the schedule.
std::string run_flags(const WorkloadSpec& spec, const Schedule& s) {
  std::string out = "--workload " + spec.workload;
  for (const auto& [key, value] : spec.config.items()) {
    if (!value.is_number_integer()) continue;
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    out += " --" + flag + " " + value.dump();
  }
  out += " --microbatch-size " + std::to_string(spec.microbatch_size) + " --dtype " +
         std::string(dtype_name(spec.dtype)) + " --schedule " + s.params.name + " --devices " +
         std::to_string(s.params.devices) + " --microbatches " +
         std::to_string(s.params.microbatches);
  return out;
}

// Byte counts checked as they are formed; an overflow is one line naming what overflowed, the
// numbers that made it and the flags that set them (the messages are only built then).
class Checked {
 public:
  Checked(const WorkloadSpec& spec, const Schedule& s) : spec_(spec), s_(s) {}

  [[noreturn]] void overflows(const std::string& what) const {
    throw UsageError(what + "; set by " + run_flags(spec_, s_) +
                     ": use a smaller workload, a smaller --microbatch-size, fewer --microbatches "
                     "or more --devices");
  }
  // a * b, where the message tells what a and b are.
  int64_t mul(int64_t a, int64_t b, int rank, const char* what, const char* a_is,
              const char* b_is) const {
    int64_t out = 0;
    if (__builtin_mul_overflow(a, b, &out))
      overflows("rank " + std::to_string(rank) + "'s " + what + " bytes, " + std::to_string(a) +
                " " + a_is + " x " + std::to_string(b) + " " + b_is + ", overflow 64 bits (2^63)");
    return out;
  }
  // a + b for `rank`, or summed over the ranks where rank is kAllRanks.
  int64_t add(int64_t a, int64_t b, int rank, const char* what) const {
    int64_t out = 0;
    if (__builtin_add_overflow(a, b, &out))
      overflows((rank == kAllRanks ? std::string("the ranks' summed")
                                   : "rank " + std::to_string(rank) + "'s") +
                " " + what + ", " + std::to_string(a) + " + " + std::to_string(b) +
                ", overflow 64 bits (2^63)");
    return out;
  }
  static constexpr int kAllRanks = -1;

 private:
  const WorkloadSpec& spec_;
  const Schedule& s_;
};

// The most micro-batches whose activations a rank holds at once: from F until the backward
// that frees them last (B, or W where the backward is split: I keeps M_W for it).
int64_t most_in_flight(const std::vector<Action>& actions) {
  int64_t live = 0, most = 0;
  auto apply = [&](const Task& t) {
    if (t.op == Op::F) ++live;
    if (t.op == Op::B || t.op == Op::W) --live;
    most = std::max(most, live);
  };
  for (const Action& a : actions) {
    apply(a.task);
    if (a.paired()) apply(a.partner);
  }
  return most;
}

// predicted_peak_bytes() sums int64 byte counts in a double: exact below 2^53, and a bound
// past it (such sizes are refused as overflow once they reach 2^63). Past it, the message names
// the peak's two factors: the micro-batches in flight on the rank and one's activations there.
int64_t whole_activation_bytes(double peak, const Checked& check, const Schedule& s,
                               const PartitionPlan& plan, int rank) {
  if (peak >= 0 && peak < 9.2e18) return std::llround(peak);
  const Placement& p = s.placement;
  int64_t per_microbatch = 0;
  for (int stage = 0; stage < p.stages(); ++stage)
    if (p.stage_rank[stage] == rank)
      per_microbatch = std::max(per_microbatch, plan.stages[p.part(stage)].activation.b);
  check.overflows("rank " + std::to_string(rank) + "'s activation peak, about " + num(peak) +
                  " bytes, overflows 64 bits (2^63, 9.2e18): up to " +
                  std::to_string(most_in_flight(s.ranks[static_cast<std::size_t>(rank)])) +
                  " micro-batches are in flight on it at once, and one micro-batch's "
                  "activations on its stages take up to " +
                  num(static_cast<double>(per_microbatch)) + " bytes");
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

  const Checked check(spec, s);
  StepMemory out;
  out.per_param = parameter_bytes(spec.dtype, o.optimizer, o.fp32_gradients);
  out.ranks.resize(static_cast<std::size_t>(p.ranks));
  for (int stage = 0; stage < p.stages(); ++stage) {
    RankMemory& r = out.ranks[static_cast<std::size_t>(p.stage_rank[stage])];
    const int part = p.part(stage);
    r.stages.push_back(stage);
    r.parts.push_back(part);
    r.param_count = check.add(r.param_count, plan.stages[part].params, p.stage_rank[stage],
                              "parameters held (every stage placed on it)");
  }

  for (int rank = 0; rank < p.ranks; ++rank) {
    RankMemory& r = out.ranks[static_cast<std::size_t>(rank)];
    r.params = check.mul(r.param_count, out.per_param.param, rank, "parameter", "parameters held",
                         "bytes each");
    r.grads = check.mul(r.param_count, out.per_param.grad, rank, "gradient", "parameters held",
                        "bytes each");
    r.optimizer = check.mul(r.param_count, out.per_param.optimizer, rank, "optimizer state",
                            "parameters held", "bytes each");
    r.activations =
        whole_activation_bytes(peaks[static_cast<std::size_t>(rank)], check, s, plan, rank);

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
      r.comm = check.add(r.comm,
                         check.mul(held, l.largest, rank, "communication",
                                   "messages held to one rank", "bytes each"),
                         rank, "communication bytes");
    }
    // total() adds the five unchecked: prove here that it fits.
    const char* total = "total bytes (parameters, gradients, optimizer state, activations, comm)";
    const int64_t weights =
        check.add(check.add(r.params, r.grads, rank, total), r.optimizer, rank, total);
    check.add(check.add(weights, r.activations, rank, total), r.comm, rank, total);
  }
  RankMemory& sum = out.sum;
  const int all = Checked::kAllRanks;
  for (const RankMemory& r : out.ranks) {
    sum.param_count = check.add(sum.param_count, r.param_count, all, "parameter count");
    sum.params = check.add(sum.params, r.params, all, "parameter bytes");
    sum.grads = check.add(sum.grads, r.grads, all, "gradient bytes");
    sum.optimizer = check.add(sum.optimizer, r.optimizer, all, "optimizer state bytes");
    sum.activations = check.add(sum.activations, r.activations, all, "activation bytes");
    sum.comm = check.add(sum.comm, r.comm, all, "communication bytes");
    const char* total = "total bytes";
    check.add(check.add(check.add(sum.params, sum.grads, all, total), sum.optimizer, all, total),
              check.add(sum.activations, sum.comm, all, total), all, total);
  }
  return out;
}

}  // namespace ppbench
