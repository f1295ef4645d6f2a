// JSON forms of metrics and closed forms, shared by every command that
// writes a record.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/cost_model.h"
#include "harness/metrics.h"
#include "schedules/formulas.h"
#include "schedules/schedule.h"
#include "workloads/layer_spec.h"

namespace ppbench {

nlohmann::json to_json(const Metrics& m);
nlohmann::json to_json(const ClosedForm& c);
nlohmann::json to_json(const StageCost& c);
// The schedule's identity: schedule, devices, microbatches, chunks,
// group_size, stages, actions, param_copies; for a cost-aware family (zb-1p, zb-2p) also
// "plan": the costs, the memory limit (M_B per rank) and M_W / M_B its order was planned for.
nlohmann::json schedule_json(const Schedule& s);

// What a record measured or modelled: the keys of kWorkloadKeys, from the spec. A measured
// device profile copies the same keys from its run's record (device_profile.cpp), so that a
// profile says which workload its times belong to.
inline constexpr const char* kWorkloadKeys[] = {"workload", "workload_config", "microbatch_size",
                                                "dtype"};
void add_workload_json(nlohmann::json& record, const WorkloadSpec& spec);

}  // namespace ppbench
