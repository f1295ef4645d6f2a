// Every schedule family ppbench knows, by its CLI name: the parameter
// constraints its paper or reference implementation imposes, its stage
// layout, its generator and its closed forms (schedules/formulas.h), in one
// entry each, as `ppbench list` prints them (and `list --format json` gives
// the scripts).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "schedules/formulas.h"
#include "schedules/schedule.h"

namespace ppbench {

// How a family runs the backward of a (stage, micro-batch): as one B, or split into I (the input
// gradient) and W (the weight gradient), so three tasks per pair instead of two. Estimates that
// count tasks before generating take it from here (harness/memory_estimate.h).
enum class Backward { kWhole, kSplit };

struct ScheduleInfo {
  std::string_view name;         // CLI name: "1f1b"
  std::string_view title;        // "1F1B (PipeDream-Flush / DAPPLE), Megatron's warm-up"
  std::string_view source;       // the paper and the reference implementation it follows
  std::string_view constraints;  // human-readable, printed by `ppbench list`
  std::string_view layout;       // stage placement: one of kLayout* below
  // kSplit where the family's generator writes I and W.
  Backward backward = Backward::kWhole;
  bool uses_chunks = false;  // accepts --chunks (interleaved-1f1b also --group-size)
  Schedule (*generate)(const ScheduleParams&) = nullptr;
  ClosedForm (*closed_form)(const ScheduleParams&, const UniformCost&) = nullptr;
  // Plans for ScheduleParams::costs and memory_limit (accepts --memory-limit); every other
  // family's order ignores them.
  bool cost_aware = false;
  // The generator packs each rank's passes on a row of slots as long as the whole schedule
  // (v_memory.cpp), a working set beyond its tasks that harness/memory_estimate.cpp bounds.
  bool packs_slot_rows = false;
};

inline constexpr std::string_view kLayoutOnePerRank = "one stage per rank: stage r on rank r";
inline constexpr std::string_view kLayoutInterleaved =
    "interleaved: v chunks per rank, stage c*D+r on rank r";
inline constexpr std::string_view kLayoutV =
    "V shape: rank r holds stages r and 2D-1-r of one chain";
inline constexpr std::string_view kLayoutTwoDirections =
    "two directions: chain 0 stage s on rank s, chain 1 stage D+j on rank D-1-j, N/2 each";

std::span<const ScheduleInfo> all_schedules();
// Throws UsageError listing the known names when `name` is unknown.
const ScheduleInfo& find_schedule(std::string_view name);
// The family's entry, or nullptr where the name is none (a schedule read from a file).
const ScheduleInfo* lookup_schedule(std::string_view name);
// The stages of one chain that the family's layout gives at these parameters, before any
// schedule is generated: v*D interleaved (v = --chunks, 2 where not given), 2D in a V, else D
// (two-direction layouts run D stages on each of their chains). 0 for an unknown name.
int layout_stages_per_chain(const ScheduleParams& p);
// Checks the generic parameters, rejects --chunks on a schedule without chunks
// and --group-size on any but interleaved-1f1b,
// then calls the family's generator (which checks its own constraints).
Schedule generate(const ScheduleParams& params);

// One generator per family (schedules/generators/*.cpp). Each throws
// UsageError naming the parameter its definition does not allow.
Schedule generate_naive(const ScheduleParams& p);
Schedule generate_gpipe(const ScheduleParams& p);
Schedule generate_1f1b(const ScheduleParams& p);
Schedule generate_interleaved_1f1b(const ScheduleParams& p);
Schedule generate_looped_bfs(const ScheduleParams& p);
Schedule generate_interleaved_zb(const ScheduleParams& p);
Schedule generate_chimera(const ScheduleParams& p);
Schedule generate_chimera_doubling(const ScheduleParams& p);
Schedule generate_zb_h1(const ScheduleParams& p);
Schedule generate_zb_h2(const ScheduleParams& p);
Schedule generate_zb_1p(const ScheduleParams& p);
Schedule generate_zb_2p(const ScheduleParams& p);
Schedule generate_zb_v(const ScheduleParams& p);
Schedule generate_v_half(const ScheduleParams& p);
Schedule generate_v_min(const ScheduleParams& p);
Schedule generate_dualpipe(const ScheduleParams& p);
Schedule generate_dualpipev(const ScheduleParams& p);

// Shared by generators: throw UsageError(message) unless `ok`.
void require(bool ok, const std::string& message);

}  // namespace ppbench
