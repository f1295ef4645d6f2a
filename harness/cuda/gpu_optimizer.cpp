#include "harness/cuda/gpu_optimizer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "harness/backends/step_values.h"
#include "schedules/registry.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/reduce.h"

namespace ppbench::cuda {

namespace {

std::size_t aligned(std::int64_t bytes) {
  return ArenaPlan::round_up(static_cast<std::size_t>(bytes));
}
bool adamw(const OptimizerOptions& o) { return o.kind == OptimizerOptions::Kind::kAdamW; }

}  // namespace

void check_gpu_optimizer(const Placement& p, const OptimizerOptions& o, bool cuda_graph) {
  ppbench::require(
      !(cuda_graph && o.enabled() && p.copies_per_part() > 1),
      "--cuda-graph with --optimizer " + to_string(o.kind) +
          ": this schedule keeps two copies of each part, whose update waits across two "
          "ranks' graphs; use --optimizer none or run without --cuda-graph");
}

std::size_t optimizer_reserve_bytes(const WorkloadSpec& spec, const PartitionPlan& plan,
                                    const Placement& p, int rank, OptimizerOptions::Kind kind) {
  if (kind == OptimizerOptions::Kind::kNone) return 0;
  const bool twins = p.copies_per_part() > 1;
  // AdamW's two f32 moments; an f32 master copy of bf16 parameters under either optimizer.
  const std::size_t master = spec.dtype == ppbench::DType::kBF16 ? 4 : 0;
  const std::size_t per_param = (kind == OptimizerOptions::Kind::kAdamW ? 8 : 0) + master;
  std::size_t bytes = 0, largest = 0;
  for (int st = 0; st < p.stages(); ++st) {
    if (p.stage_rank[st] != rank) continue;
    const StageSpec& part = plan.stages[static_cast<std::size_t>(p.part(st))];
    for (int l = part.first_layer; l < part.first_layer + part.num_layers; ++l) {
      const auto n = static_cast<std::size_t>(spec.layers[static_cast<std::size_t>(l)].params);
      // 64 KiB: every tensor of a layer rounded up to the arena's alignment, and the counter.
      bytes += n * per_param + (std::size_t{64} << 10);
      largest = std::max(largest, n);
    }
  }
  // Scratch for two copies: a gradient sum, a value, a master copy and two moments.
  if (twins) bytes += largest * 5 * 4 + (std::size_t{8} << 10);
  return bytes;
}

GpuOptimizer::GpuOptimizer(const OptimizerOptions& o, const Placement& p, const GpuDevices& devices,
                           const std::vector<GpuPipelineRank*>& ranks)
    : o_(o), placement_(p), devices_(devices), ranks_(ranks) {
  if (!o_.enabled()) throw std::logic_error("a GPU optimizer for --optimizer none");
  const int parts = p.stages_per_chain();
  for (int k = 0; k < parts; ++k) parts_.push_back(std::make_unique<Part>());
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    for (const auto& sp :
         ranks_[r] ? ranks_[r]->params_by_layer() : std::vector<StageParams<Param>>{}) {
      Part& part = *parts_.at(static_cast<std::size_t>(sp.part));
      for (const Copy& c : part.copies)
        if (c.rank == static_cast<int>(r))
          throw std::logic_error("rank " + std::to_string(r) + " holds part " +
                                 std::to_string(sp.part) + " twice");
      part.copies.emplace_back();
      part.copies.back().rank = static_cast<int>(r);
      part.copies.back().params = all_params(sp);
    }
  for (const auto& part : parts_)
    if (part->copies.size() > 2)
      throw std::logic_error("a part with more than two copies: the optimizer sums two");

  // Per rank: what its copies keep, and the scratch where it holds a part with two copies.
  // bf16 parameters are stepped on an f32 master copy under SGD as under AdamW: an update below
  // half a bf16 ulp would round away on the parameter itself.
  auto needs_master = [](const Param* prm) { return prm->value.dtype() == DType::kBF16; };
  std::vector<std::size_t> bytes(ranks_.size(), 0);
  std::vector<std::int64_t> largest_twin(ranks_.size(), -1);
  for (const auto& part : parts_)
    for (const Copy& c : part->copies) {
      auto& b = bytes[static_cast<std::size_t>(c.rank)];
      for (const Param* prm : c.params) {
        const std::int64_t n = prm->value.numel();
        b += aligned(n * 4) * ((adamw(o_) ? 2 : 0) + (needs_master(prm) ? 1 : 0));
        if (part->copies.size() > 1)
          largest_twin[static_cast<std::size_t>(c.rank)] =
              std::max(largest_twin[static_cast<std::size_t>(c.rank)], n);
      }
      if (adamw(o_)) b += aligned(64);  // the counter's block
    }
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    if (largest_twin[r] >= 0) bytes[r] += aligned(largest_twin[r] * 4) * 5 + aligned(64);

  scratch_.resize(ranks_.size());
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (bytes[r] == 0) {  // SGD on f32, or a rank of another process
      arenas_.push_back(nullptr);
      continue;
    }
    devices_.rank(static_cast<int>(r)).make_current();
    arenas_.push_back(
        std::make_unique<DeviceArena>("rank " + std::to_string(r) + " optimizer", bytes[r]));
    if (largest_twin[r] >= 0) {
      const Shape s = {std::max<std::int64_t>(largest_twin[r], 1)};
      DeviceArena& a = *arenas_.back();
      Scratch& x = scratch_[r];
      x.grad = DTensor(a, s, DType::kF32, "summed gradient");
      x.value = DTensor(a, s, DType::kF32, "other copy's parameter");  // f32 holds bf16 too
      x.master = DTensor(a, s, DType::kF32, "other copy's master");
      x.m = DTensor(a, s, DType::kF32, "other copy's first moment");
      x.v = DTensor(a, s, DType::kF32, "other copy's second moment");
      x.counter = DTensor(a, {16}, DType::kF32, "other copy's step counter");
    }
  }
  for (auto& part : parts_)
    for (Copy& c : part->copies) {
      const RankDevice& dev = devices_.rank(c.rank);
      dev.make_current();
      if (part->copies.size() > 1)
        CUDA_CHECK(cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming));
      DeviceArena* a = arenas_[static_cast<std::size_t>(c.rank)].get();
      for (const Param* prm : c.params) {
        const Shape s = {prm->value.numel()};
        if (adamw(o_)) {
          c.m.emplace_back(*a, s, DType::kF32, "AdamW first moment");
          c.v.emplace_back(*a, s, DType::kF32, "AdamW second moment");
          zero(c.m.back(), dev.compute);
          zero(c.v.back(), dev.compute);
        }
        // One entry per parameter, empty where it is f32 already (SGD on f32 keeps no state and
        // has no arena).
        c.master.emplace_back();
        if (needs_master(prm)) {
          c.master.back() = DTensor(*a, s, DType::kF32, "f32 master parameters");
          widen_to_f32(dev.compute, prm->value.dtype(), prm->value.data(),
                       c.master.back().as<float>(), prm->value.numel());
        }
      }
      if (!adamw(o_)) continue;
      c.counter_block = DTensor(*a, {16}, DType::kF32, "AdamW step counter");
      zero(c.counter_block, dev.compute);
      c.counter = static_cast<AdamWCounter*>(c.counter_block.data());
    }
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r] == nullptr) continue;
    devices_.rank(static_cast<int>(r)).make_current();
    CUDA_CHECK(cudaStreamSynchronize(devices_.rank(static_cast<int>(r)).compute));
  }
}

GpuOptimizer::~GpuOptimizer() {
  for (auto& part : parts_)
    for (Copy& c : part->copies)
      if (c.done != nullptr) {
        try {
          devices_.rank(c.rank).make_current();
        } catch (...) {
        }
        cudaEventDestroy(c.done);
      }
  // No rank's green context stays current on this thread (one thread at a time may hold it).
  try {
    devices_.release_current();
  } catch (...) {
  }
}

void GpuOptimizer::begin_step() {
  for (auto& part : parts_) part->arrived.store(0, std::memory_order_relaxed);
}

double GpuOptimizer::state_bytes(int rank) const {
  double b = 0;
  for (const auto& part : parts_)
    for (const Copy& c : part->copies)
      if (c.rank == rank) {
        for (const auto* ts : {&c.m, &c.v, &c.master})
          for (const DTensor& t : *ts) b += static_cast<double>(t.bytes());
      }
  return b;
}

void GpuOptimizer::step_param(int rank, DType dtype, void* p, float* master, const float* g,
                              float* m, float* v, std::int64_t n, const AdamWCounter* counter) {
  const cudaStream_t s = devices_.rank(rank).compute;
  if (o_.kind == OptimizerOptions::Kind::kSgd)
    sgd_update(s, dtype, p, master, g, n, o_.lr);
  else
    adamw_update(s, dtype, p, master, g, m, v, n,
                 {o_.lr, o_.weight_decay, o_.beta1, o_.beta2, o_.eps}, counter);
}

float* GpuOptimizer::master_of(const Copy& c, std::size_t k) {
  return k < c.master.size() && !c.master[k].empty() ? c.master[k].as<float>() : nullptr;
}

GpuOptimizer::Copy& GpuOptimizer::copy_of(int rank, int stage) {
  Part& part = *parts_.at(static_cast<std::size_t>(placement_.part(stage)));
  auto it = std::find_if(part.copies.begin(), part.copies.end(),
                         [rank](const Copy& c) { return c.rank == rank; });
  if (it == part.copies.end())
    throw std::logic_error("stage " + std::to_string(stage) + " is not on rank " +
                           std::to_string(rank));
  return *it;
}

void GpuOptimizer::step_copy(int rank, int stage,
                             const std::function<const float*(std::size_t k)>& grad) {
  Copy& own = copy_of(rank, stage);
  if (adamw(o_))
    adamw_begin_step(devices_.rank(rank).compute, own.counter, o_.beta1, o_.beta2, o_.lr);
  for (std::size_t k = 0; k < own.params.size(); ++k) {
    Param& prm = *own.params[k];
    step_param(rank, prm.value.dtype(), prm.value.data(), master_of(own, k), grad(k),
               adamw(o_) ? own.m[k].as<float>() : nullptr,
               adamw(o_) ? own.v[k].as<float>() : nullptr, prm.value.numel(), own.counter);
  }
}

bool GpuOptimizer::stage_done(int rank, int stage) {
  Part& part = *parts_.at(static_cast<std::size_t>(placement_.part(stage)));
  const cudaStream_t s = devices_.rank(rank).compute;
  Copy& own = copy_of(rank, stage);
  if (part.copies.size() == 1) {
    step_copy(rank, stage, [&own](std::size_t k) { return own.params[k]->grad.as<float>(); });
    return true;
  }
  // The copy that finishes last updates both (its arrival publishes the other's event).
  CUDA_CHECK(cudaEventRecord(own.done, s));
  if (part.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 < 2) return false;
  if (adamw(o_)) adamw_begin_step(s, own.counter, o_.beta1, o_.beta2, o_.lr);

  Copy& other = &part.copies[0] == &own ? part.copies[1] : part.copies[0];
  Scratch& x = scratch_[static_cast<std::size_t>(rank)];
  CUDA_CHECK(cudaStreamWaitEvent(s, other.done, 0));
  // The other copy's counter comes over once and advances here, as its own would.
  if (adamw(o_)) {
    CUDA_CHECK(cudaMemcpyAsync(x.counter.data(), other.counter, sizeof(AdamWCounter),
                               cudaMemcpyDefault, s));
    adamw_begin_step(s, x.counter.as<AdamWCounter>(), o_.beta1, o_.beta2, o_.lr);
  }
  // cudaMemcpyDefault: the other copy lives in another green context or on another GPU.
  auto fetch = [s](DTensor& to, const DTensor& from) {
    CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), static_cast<std::size_t>(from.bytes()),
                               cudaMemcpyDefault, s));
  };
  auto put_back = [s](const DTensor& to, const DTensor& from) {
    CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), static_cast<std::size_t>(to.bytes()),
                               cudaMemcpyDefault, s));
  };
  for (std::size_t k = 0; k < own.params.size(); ++k) {
    Param& mine = *own.params[k];
    const Param& theirs = *other.params[k];
    const std::int64_t n = mine.value.numel();
    // The summed gradient: a + b equals b + a exactly, so which rank sums does not matter.
    fetch(x.grad, theirs.grad);
    add_f32(ranks_[static_cast<std::size_t>(rank)]->context(), x.grad.as<float>(),
            mine.grad.as<float>(), n);
    const float* g = x.grad.as<float>();
    step_param(rank, mine.value.dtype(), mine.value.data(), master_of(own, k), g,
               adamw(o_) ? own.m[k].as<float>() : nullptr,
               adamw(o_) ? own.v[k].as<float>() : nullptr, n, own.counter);
    // The other copy, with its own state, through scratch.
    fetch(x.value, theirs.value);
    if (adamw(o_)) {
      fetch(x.m, other.m[k]);
      fetch(x.v, other.v[k]);
    }
    if (master_of(other, k) != nullptr) fetch(x.master, other.master[k]);
    step_param(rank, theirs.value.dtype(), x.value.data(),
               master_of(other, k) != nullptr ? x.master.as<float>() : nullptr, g,
               adamw(o_) ? x.m.as<float>() : nullptr, adamw(o_) ? x.v.as<float>() : nullptr, n,
               adamw(o_) ? x.counter.as<AdamWCounter>() : nullptr);
    put_back(theirs.value, x.value);
    if (adamw(o_)) {
      put_back(other.m[k], x.m);
      put_back(other.v[k], x.v);
    }
    if (master_of(other, k) != nullptr) put_back(other.master[k], x.master);
  }
  if (adamw(o_))
    CUDA_CHECK(cudaMemcpyAsync(other.counter, x.counter.data(), sizeof(AdamWCounter),
                               cudaMemcpyDefault, s));
  return true;
}

}  // namespace ppbench::cuda
