// Fuzz target: a schedule file as a researcher might write it, in either format
// (schedules/schedule_file.h), followed the way `ppbench simulate --schedule-file` follows it.
//
// Input: byte 0 chooses how (bit 0 the format, bits 1-2 the channel capacity the validator checks
// against, bits 3-5 the cores the simulator's ranks share); the rest is the file.
//
// What must hold for every input:
//   - parsing and validating refuse with UsageError or InvalidSchedule and nothing else;
//   - a schedule that validates reads back unchanged from both written forms (to_schedule_text,
//     to_pytorch_csv): the same orders, placement, D and N;
//   - its lowered program is deadlock-free on the validated capacity, and the simulator walks it
//     to the end with every action placed once, no event ending before it starts;
//   - simulate_metrics, which keeps no events, agrees with the metrics of the full trace.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "schedules/lower.h"
#include "schedules/schedule_file.h"
#include "schedules/validate.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/simulation_checks.h"

namespace ppbench::fuzz {
namespace {

void expect_same_schedule(const Schedule& got, const Schedule& want, const char* form) {
  const std::string f = form;
  fuzz_check(got.ranks == want.ranks, f + " round trip changed the orders");
  fuzz_check(got.placement == want.placement, f + " round trip changed the placement");
  fuzz_check(got.params.devices == want.params.devices, f + " round trip changed D");
  fuzz_check(got.params.microbatches == want.params.microbatches, f + " round trip changed N");
}

void follow(const ScheduleFile& file, int capacity, int cores) {
  const Schedule& s = file.schedule;
  expect_same_schedule(
      parse_schedule_file(to_schedule_text(s), "back.txt", ScheduleFileFormat::kText).schedule, s,
      "text");
  std::string csv;
  try {
    csv = to_pytorch_csv(s);
  } catch (const UsageError&) {
    // A layout PyTorch's CSV cannot express: refused in one line, which is the contract.
  }
  if (!csv.empty())
    expect_same_schedule(
        parse_schedule_file(csv, "back.csv", ScheduleFileFormat::kPytorchCsv).schedule, s, "csv");

  check_deadlock_free(s, lower(s), capacity);
  check_simulation(s, cores);
}

}  // namespace
}  // namespace ppbench::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ppbench;
  if (size == 0) return 0;
  const unsigned how = data[0];
  const auto format = (how & 1) ? ScheduleFileFormat::kPytorchCsv : ScheduleFileFormat::kText;
  const int capacity = static_cast<int>((how >> 1) & 3);
  const int cores = static_cast<int>((how >> 3) & 7);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  ScheduleFile file;
  try {
    file = parse_schedule_file(text, "fuzz", format);
    validate_file(file, {.channel_capacity = capacity});
  } catch (const UsageError&) {
    return 0;
  } catch (const InvalidSchedule&) {
    return 0;
  }
  fuzz::follow(file, capacity, cores);
  return 0;
}
