// Fuzz target: the schedules a researcher gets by editing a generated one (swapping, moving,
// dropping, duplicating, splitting, pairing actions) and reading it back from a file, the way a
// hand-written schedule reaches ppbench. Random bytes seldom spell a sound schedule; edits of a
// sound one explore the schedules that are nearly sound, where the validator has to be right.
//
// Input: byte 0 as in fuzz_schedule_file.cpp (bits 1-2 channel capacity, bits 3-5 cores); bytes
// 1-4 the family (index into all_schedules()), D (1-6), N (1-12) and chunks (1-3); then up to 24
// edits of three bytes each (edit, rank, position).
//
// What must hold for every edited schedule:
//   - its text form reads back with the same orders, and the same placement where it is sound;
//     only a schedule that is not sound may be refused;
//   - the validator and the simulator agree: a schedule validate() accepts at any capacity the
//     simulator walks to the end, each task once, with the streamed metrics equal to the
//     trace's; one whose structure is sound but that validate() refuses as a deadlock, the
//     simulator refuses too;
//   - a schedule sound with bounded channels is sound with unbounded ones;
//   - the GPU executor's transfer plan of a sound schedule completes under rendezvous semantics.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "harness/cuda/nccl_plan.h"
#include "harness/cuda/p2p_deadlock_check.h"
#include "harness/simulator.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/schedule_file.h"
#include "schedules/validate.h"
#include "tests/common/schedule_edits.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/simulation_checks.h"

namespace ppbench::fuzz {
namespace {

// Whether validate() accepts `s` at `capacity`; any other exception escapes (a failure).
bool sound(const Schedule& s, int capacity) {
  try {
    validate(s, {.channel_capacity = capacity});
    return true;
  } catch (const InvalidSchedule&) {
    return false;
  }
}

// The GPU executor's transfer plan of a sound schedule (NCCL's rendezvous point-to-point, and
// the virtual devices' copies, which take each peer's messages in the order it sends them):
// grouped, its receives put in the senders' order and blocked sends deferred, it must complete.
// A sound schedule refused here would run on CPUs and not on GPUs.
void check_gpu_transfers(const Schedule& s, const Program& program) {
  NcclPlanOptions o;
  for (int st = 0; st < s.stages(); ++st)
    o.activation_bytes.push_back(static_cast<std::size_t>(st + 1) * 64);
  try {
    check_p2p_deadlock_free(build_nccl_plan(s, program, o));
  } catch (const InvalidSchedule& e) {
    fuzz_check(false, std::string("a sound schedule's GPU transfer plan deadlocks: ") + e.what());
  }
}

void check(const Schedule& s, int capacity, int cores) {
  const bool structure_ok = [&] {
    try {
      validate_structure(s);
      return true;
    } catch (const InvalidSchedule&) {
      return false;
    }
  }();
  const bool unbounded_ok = sound(s, 0);
  // The parser refuses some broken files before any validation (too few tasks for the
  // micro-batches its lines name); a sound schedule it must read back as it was.
  try {
    const ScheduleFile back =
        parse_schedule_file(to_schedule_text(s), "edited.txt", ScheduleFileFormat::kText);
    fuzz_check(back.schedule.ranks == s.ranks, "the text form changed the orders");
    // A file's N is what its actions name, so only a sound schedule keeps its placement whole.
    if (unbounded_ok)
      fuzz_check(back.schedule.placement == s.placement, "the text form changed the placement");
  } catch (const UsageError& e) {
    fuzz_check(!unbounded_ok, std::string("a sound schedule's text form is refused: ") + e.what());
  }
  if (capacity > 0 && sound(s, capacity))
    fuzz_check(unbounded_ok, "sound with bounded channels but not with unbounded ones");
  if (!structure_ok) {
    fuzz_check(!unbounded_ok, "validate() accepts what validate_structure() refuses");
    return;
  }
  if (!unbounded_ok) {
    auto refused = [&](const CostModel& costs, int on_cores) {
      try {
        (void)simulate(s, costs, {.record_comm = false, .cores = on_cores});
      } catch (const InvalidSchedule&) {
        return true;
      }
      return false;
    };
    fuzz_check(refused(unequal_costs(s.stages()), cores),
               "the simulator ran a schedule validate() calls a deadlock");
    fuzz_check(refused(rendezvous_costs(s.stages()), 0),
               "the simulator's rendezvous walk ran a schedule validate() calls a deadlock");
    return;
  }
  check_simulation(s, cores);
  const Program program = lower(s);
  check_deadlock_free(s, program, 0);
  check_gpu_transfers(s, program);
}

}  // namespace
}  // namespace ppbench::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ppbench;
  if (size < 5) return 0;
  const int capacity = (data[0] >> 1) & 3;
  const int cores = (data[0] >> 3) & 7;
  const std::span<const ScheduleInfo> families = all_schedules();
  const ScheduleInfo& family = families[data[1] % families.size()];
  ScheduleParams p;
  p.name = std::string(family.name);
  p.devices = 1 + data[2] % 6;
  p.microbatches = 1 + data[3] % 12;
  if (family.uses_chunks) p.chunks = 1 + data[4] % 3;
  Schedule s;
  try {
    s = generate(p);
  } catch (const UsageError&) {
    return 0;  // parameters the family does not take: refused, as the CLI refuses them
  }
  constexpr std::size_t kMaxEdits = 24;
  for (std::size_t e = 5; e + 2 < size && (e - 5) / 3 < kMaxEdits; e += 3)
    edits::apply(s, static_cast<edits::Edit>(data[e] % static_cast<int>(edits::Edit::kCount)),
                 data[e + 1], data[e + 2]);
  fuzz::check(s, capacity, cores);
  return 0;
}
