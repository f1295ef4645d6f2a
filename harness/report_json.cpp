#include "harness/report_json.h"

#include "schedules/registry.h"

namespace ppbench {

namespace {

template <class T>
nlohmann::json optional_json(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json to_json(const Metrics& m) {
  nlohmann::json ranks = nlohmann::json::array();
  double share = 0;
  for (const auto& r : m.ranks) {
    share = std::max(share, r.peak_activation_share);
    ranks.push_back({{"rank", r.rank},
                     {"busy", r.busy},
                     {"idle", r.idle},
                     {"span_idle", r.span_idle},
                     {"first_start", r.first_start},
                     {"last_end", r.last_end},
                     {"peak_activations", r.peak_activations},
                     {"peak_activation_share", r.peak_activation_share}});
    // Only a trace with collectives (data parallelism) has these: records without stay as they
    // were.
    if (m.collectives > 0) {
      auto& e = ranks.back();
      e["compute_end"] = r.compute_end;
      e["allreduce_time"] = r.allreduce_time;
      e["allreduce_bytes"] = r.allreduce_bytes;
      e["exposed_allreduce"] = r.exposed_allreduce;
    }
  }
  nlohmann::json out = {{"makespan", m.makespan},
                        {"total_busy", m.total_busy},
                        {"bubble_fraction", m.bubble_fraction},
                        {"bubble_ratio", m.bubble_ratio},
                        {"zb_bubble_rate", m.zb_bubble_rate},
                        {"peak_activations", m.peak_activations},
                        {"peak_activation_share", share},
                        {"ranks", std::move(ranks)}};
  if (m.collectives > 0) {
    out["collectives"] = m.collectives;
    out["allreduce_time"] = m.allreduce_time;
    out["allreduce_bytes"] = m.allreduce_bytes;
    out["exposed_allreduce"] = m.exposed_allreduce;
  }
  return out;
}

nlohmann::json to_json(const ClosedForm& c) {
  return {{"bubble_formula", c.bubble_formula},
          {"bubble_fraction", optional_json(c.bubble_fraction)},
          {"idle_formula", c.idle_formula},
          {"idle_per_rank", optional_json(c.idle_per_rank)},
          {"activations_formula", c.activations_formula},
          {"peak_activations", optional_json(c.peak_activations)},
          {"params", c.params_formula},
          {"note", c.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.note)}};
}

nlohmann::json to_json(const StageCost& c) {
  return {{"F", c.f}, {"B", c.b}, {"I", c.i}, {"W", c.w}, {"FB", c.fb}, {"comm", c.comm}};
}

nlohmann::json schedule_json(const Schedule& s) {
  const Placement& p = s.placement;
  nlohmann::json out = {{"schedule", s.params.name},
                        {"devices", s.params.devices},
                        {"microbatches", s.params.microbatches},
                        {"chunks", s.params.chunks == 0 ? 1 : s.params.chunks},
                        {"group_size", s.params.group_size},
                        {"stages", p.stages()},
                        {"actions", s.action_count()},
                        // Copies of each model stage: two for the bidirectional layouts.
                        {"param_copies", p.chains()}};
  // What a cost-aware family planned for: its order depends on these, not only on D and N.
  if (const ScheduleInfo* info = lookup_schedule(s.params.name); info && info->cost_aware) {
    const PlanningCosts& c = s.params.costs;
    out["plan"] = {{"F", c.f},
                   {"I", c.i},
                   {"W", c.w},
                   {"comm", c.comm},
                   {"memory_limit", s.params.memory_limit},
                   {"w_memory", s.params.w_memory}};
  }
  return out;
}

void add_workload_json(nlohmann::json& record, const WorkloadSpec& spec) {
  record["workload"] = spec.workload;
  record["workload_config"] = spec.config;
  record["microbatch_size"] = spec.microbatch_size;
  record["dtype"] = std::string(dtype_name(spec.dtype));
}

}  // namespace ppbench
