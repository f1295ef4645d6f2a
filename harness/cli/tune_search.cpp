#include "harness/cli/tune_search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

#include "core/error.h"
#include "harness/backends/run_record.h"
#include "harness/memory_estimate.h"
#include "harness/metrics.h"
#include "harness/replay.h"
#include "harness/simulator.h"
#include "harness/workload_costs.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace ppbench::cli {

const char* status_name(TuneStatus s) {
  switch (s) {
    case TuneStatus::kFits:
      return "fits";
    case TuneStatus::kOverMemory:
      return "over_memory";
    case TuneStatus::kInvalid:
      return "invalid";
  }
  return "invalid";
}

double TuneCandidate::max_peak_bytes() const {
  return peak_bytes.empty() ? 0 : *std::max_element(peak_bytes.begin(), peak_bytes.end());
}

std::string TuneCandidate::label() const {
  std::string s = schedule;
  if (chunks > 0) s += " v=" + std::to_string(chunks);
  return s + " N=" + std::to_string(microbatches) + " b=" + std::to_string(microbatch_size);
}

std::vector<int> microbatch_counts(int devices, std::int64_t global_batch) {
  std::vector<int> out;
  for (int n = devices; n <= 8 * devices; ++n)
    if (global_batch % n == 0) out.push_back(n);
  return out;
}

std::vector<TuneCandidate> enumerate_candidates(const TuneSpace& space) {
  std::vector<TuneCandidate> all;
  for (const ScheduleInfo& info : all_schedules()) {
    std::vector<int> chunks{0};
    if (info.uses_chunks) chunks = space.chunk_counts;
    for (int v : chunks)
      for (int n : space.microbatch_counts) {
        TuneCandidate c;
        c.schedule = std::string(info.name);
        c.chunks = v;
        c.microbatches = n;
        c.microbatch_size = space.global_batch / n;
        all.push_back(std::move(c));
      }
  }
  return all;
}

double candidate_tasks(int devices, const TuneCandidate& c) {
  const ScheduleParams p{
      .name = c.schedule, .devices = devices, .microbatches = c.microbatches, .chunks = c.chunks};
  const double tasks = schedule_tasks(p);
  const ScheduleInfo* info = lookup_schedule(c.schedule);
  if (info == nullptr || !info->packs_slot_rows) return tasks;
  // v_memory.cpp's squeeze tries each pass against a tree of the rank's slots (O(log S) a try),
  // and its walks over slot rows miss the cache more as D grows: per task, generating and
  // simulating v-half took 1.0, 1.4 and 2.0 us at D = 256, 512, 1024 (N = D + 1; `simulate`,
  // Release, a 2-core x86 VM), about 0.3 us x sqrt(D) / 4 where the bound prices a simulated
  // task at 0.3 us (2e8 tasks, about a minute); v-min takes less. So they count as
  // (1 + sqrt(D) / 4) tasks each.
  return tasks * (1 + std::sqrt(static_cast<double>(devices)) / 4);
}

double search_tasks(const TuneSpace& space, const std::vector<TuneCandidate>& all) {
  double tasks = 0;
  for (const TuneCandidate& c : all) tasks += candidate_tasks(space.devices, c);
  return tasks;
}

namespace {

// The workload cut for one micro-batch size and one stage count, or why it cannot be.
struct CutWorkload {
  WorkloadCosts costs;
  std::string error;
};

// The workload at one micro-batch size, cut once per stage count and shared by every candidate of
// that size. The search costs one size at a time (evaluate_candidates), so that one spec and its
// few cuts are held at once, not a copy per size of the space.
class SizeCuts {
 public:
  SizeCuts(const WorkloadCosts& base, const WorkloadCostFlags& flags, std::int64_t microbatch_size)
      : base_(base), flags_(flags), microbatch_size_(microbatch_size) {}

  std::int64_t microbatch_size() const { return microbatch_size_; }

  const CutWorkload& cut(int stages) {
    auto it = cuts_.find(stages);
    if (it != cuts_.end()) return it->second;
    CutWorkload& out = cuts_[stages];
    try {
      // The base's profile and limits with this size's spec; the cut sets plan, parts, bounding.
      out.costs = WorkloadCosts{.spec = spec(),
                                .plan = {},
                                .profile = base_.profile,
                                .parts = {},
                                .bounding = 0,
                                .memory_limit = base_.memory_limit,
                                .eager_limit = base_.eager_limit};
      partition_workload(out.costs, flags_, stages);
    } catch (const UsageError& e) {
      out.error = e.what();
    }
    return out;
  }

 private:
  const WorkloadSpec& spec() {
    if (spec_) return *spec_;
    const auto& m = base_.profile.measured_for;
    // A measured profile's times hold for the micro-batch size they were measured at only.
    if (base_.profile.kind == "measured" && m.at("microbatch_size") != microbatch_size_)
      throw UsageError("--device-profile " + quoted(base_.profile.source) +
                       " was measured with microbatch_size " + m.at("microbatch_size").dump() +
                       ", not " + std::to_string(microbatch_size_));
    WorkloadFlags f = flags_.workload;
    f.microbatch_size = microbatch_size_;
    return spec_.emplace(f.build());
  }

  const WorkloadCosts& base_;
  const WorkloadCostFlags& flags_;
  std::int64_t microbatch_size_;
  std::optional<WorkloadSpec> spec_;
  std::map<int, CutWorkload> cuts_;
};

// The candidate refused, as evaluate would, where the workload cannot be cut into its layout's
// stages (fewer layers, a --partition or measured profile of another count): found before its
// schedule is generated (v-half's takes seconds at large D) and before it is announced.
bool refused_uncut(TuneCandidate& c, SizeCuts& cache, int devices) {
  const CutWorkload& cut = cache.cut(layout_stages_per_chain({.name = c.schedule,
                                                              .devices = devices,
                                                              .microbatches = c.microbatches,
                                                              .chunks = c.chunks}));
  if (cut.error.empty()) return false;
  c.status = TuneStatus::kInvalid;
  c.reason = "invalid: " + cut.error;
  return true;
}

void evaluate(TuneCandidate& c, SizeCuts& cache, double limit, int devices) {
  ScheduleParams params{
      .name = c.schedule, .devices = devices, .microbatches = c.microbatches, .chunks = c.chunks};
  try {
    Schedule s = generate(params);
    const CutWorkload& cut = cache.cut(s.placement.stages_per_chain());
    if (!cut.error.empty()) throw UsageError(cut.error);
    const WorkloadCosts& w = cut.costs;
    // As simulate does: a cost-aware family plans again, for the workload's bounding stage.
    if (find_schedule(c.schedule).cost_aware) {
      params.costs = planning_costs(w);
      s = generate(params);
    }
    validate_structure(s);
    // As simulate does: a measured profile's optimizer times are each stage's update after its
    // last backward, which can move the step's end.
    const CostModel costs = schedule_cost_model(s.placement, w.parts);
    const Metrics m =
        w.profile.optimizer.empty()
            ? simulate_metrics(s, costs)
            : compute_metrics(simulate(s, costs,
                                       {.optimizer_steps = optimizer_steps_after_backwards(
                                            s, w.profile.optimizer)}),
                              s.placement);
    c.makespan = m.makespan;
    c.bubble_fraction = m.bubble_fraction;
    c.peak_bytes = predicted_peak_bytes(s, w.plan, false);
  } catch (const UsageError& e) {
    c.status = TuneStatus::kInvalid;
    c.reason = std::string("invalid: ") + e.what();
    return;
  } catch (const InvalidSchedule& e) {
    c.status = TuneStatus::kInvalid;
    c.reason = std::string("invalid: ") + e.what();
    return;
  }
  c.status = TuneStatus::kFits;
  for (std::size_t r = 0; r < c.peak_bytes.size(); ++r)
    if (limit > 0 && c.peak_bytes[r] > limit) {
      c.status = TuneStatus::kOverMemory;
      c.reason = "over memory: rank " + std::to_string(r) + " needs " +
                 bytes_text(c.peak_bytes[r]) + " > limit " + bytes_text(limit);
      break;
    }
}

}  // namespace

void evaluate_candidates(std::vector<TuneCandidate>& all, const WorkloadCosts& w,
                         const WorkloadCostFlags& flags, int devices,
                         const std::function<void(std::size_t, const TuneCandidate&)>& progress) {
  // One micro-batch size at a time (its spec and cuts dropped before the next is built); within
  // a size, the order of the space.
  std::vector<std::size_t> order(all.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return all[a].microbatch_size < all[b].microbatch_size;
  });
  std::optional<SizeCuts> cache;
  for (std::size_t done = 0; done < order.size(); ++done) {
    TuneCandidate& c = all[order[done]];
    if (!cache || cache->microbatch_size() != c.microbatch_size) {
      cache.reset();
      cache.emplace(w, flags, c.microbatch_size);
    }
    if (refused_uncut(c, *cache, devices)) continue;
    progress(done, c);
    evaluate(c, *cache, w.memory_limit, devices);
  }
}

std::vector<const TuneCandidate*> ranked(const std::vector<TuneCandidate>& all) {
  std::vector<const TuneCandidate*> out;
  for (const TuneCandidate& c : all)
    if (c.status == TuneStatus::kFits) out.push_back(&c);
  // Step times equal but for the last bits of their sums (another order of the same additions)
  // are a tie, which the smaller peak breaks: compared at 12 significant digits.
  const auto rounded = [](double t) {
    if (t == 0 || !std::isfinite(t)) return t;
    const double unit = std::pow(10.0, std::floor(std::log10(std::abs(t))) - 11);
    return std::round(t / unit) * unit;
  };
  std::stable_sort(out.begin(), out.end(), [&](const TuneCandidate* a, const TuneCandidate* b) {
    const double ta = rounded(a->makespan), tb = rounded(b->makespan);
    if (ta != tb) return ta < tb;
    return a->max_peak_bytes() < b->max_peak_bytes();
  });
  return out;
}

}  // namespace ppbench::cli
