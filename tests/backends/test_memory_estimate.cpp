// Memory estimates and the bar they are held to (harness/memory_estimate.h), and the checked sizes
// of the workload builders (workloads/shape_check.h): a size that cannot fit or that overflows 64
// bits is refused before anything is allocated, with the numbers in one line.
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/memory_estimate.h"
#include "schedules/registry.h"
#include "workloads/amoebanet.h"
#include "workloads/mlp.h"
#include "workloads/partition.h"
#include "workloads/shape_check.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

TEST(ByteSize, ParsesSuffixesAndRefusesTheRest) {
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("64G"), 64.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_byte_size("64GiB"), 64.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_byte_size("512m"), 512.0 * 1024 * 1024);
  EXPECT_EQ(parse_byte_size("1.5T"), 1.5 * 1024 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_byte_size("2KB"), 2048);
  for (const char* bad :
       {"", "0", "-1", "nan", "inf", "1e400", "64X", "G", "1.5.2G", " 1G", "8E", "99999P"})
    EXPECT_THROW(parse_byte_size(bad), UsageError) << bad;
  try {
    parse_byte_size("64X");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
  }
}

TEST(Meminfo, ReadsMemAvailable) {
  EXPECT_EQ(meminfo_available_bytes("MemTotal:       24000000 kB\nMemFree:         1000 kB\n"
                                    "MemAvailable:   22920960 kB\n"),
            22920960.0 * 1024);
  EXPECT_EQ(meminfo_available_bytes("MemTotal: 1 kB\n"), 0);
  // Found by fuzz_byte_size: from_chars reads "nan" and "inf", which are no byte counts.
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: NaN kB\n"), 0);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: inf kB\n"), 0);
  EXPECT_GT(available_memory().bytes, 0);  // a Linux machine has /proc/meminfo
}

TEST(RequireMemory, NamesWhatTheEstimateAndTheBar) {
  const MemoryBudget bar{1024.0 * 1024 * 1024, "available (MemAvailable in /proc/meminfo)"};
  EXPECT_NO_THROW(require_memory(bar, {1000, "small"}, "simulate --devices 2"));
  try {
    require_memory(bar, {3.0 * 1024 * 1024 * 1024 * 1024, "8.6e+09 actions x 180 bytes"},
                   "simulate --devices 4096 --microbatches 1048576");
    FAIL();
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--devices 4096 --microbatches 1048576"), std::string::npos) << m;
    EXPECT_NE(m.find("3 TiB"), std::string::npos) << m;
    EXPECT_NE(m.find("1 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("MemAvailable"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_THROW(require_memory(bar, {std::numeric_limits<double>::infinity(), "x"}, "w"),
               UsageError);
  EXPECT_THROW(require_memory(bar, {std::nan(""), "x"}, "w"), UsageError);
}

// A family the count does not know gets 0 and passes the memory bar at any size, so every
// registered family must be counted, at least task for task (an overlapped pair is two; DualPipe's
// pairs carry a whole B, so it is counted as if every backward were split).
TEST(ScheduleTasks, CountsEveryRegisteredFamily) {
  for (const ScheduleInfo& info : all_schedules()) {
    const ScheduleParams p{std::string(info.name), 4, 16, info.uses_chunks ? 2 : 0, 0};
    double tasks = 0;
    for (const auto& rank : generate(p).ranks)
      for (const Action& a : rank) tasks += a.paired() ? 2 : 1;
    EXPECT_GE(schedule_tasks(p), tasks) << info.name;
    EXPECT_LE(schedule_tasks(p), 1.5 * tasks) << info.name;
  }
}

TEST(ScheduleTasks, CountsFBIWFromTheParameters) {
  EXPECT_EQ(schedule_tasks({"1f1b", 4, 16, 0, 0}), 128);
  EXPECT_EQ(schedule_tasks({"gpipe", 4, 16, 0, 0}), 128);
  EXPECT_EQ(schedule_tasks({"interleaved-1f1b", 4, 16, 0, 0}), 256);
  EXPECT_EQ(schedule_tasks({"interleaved-1f1b", 4, 16, 3, 0}), 384);
  EXPECT_EQ(schedule_tasks({"looped-bfs", 4, 16, 0, 0}), 256);
  EXPECT_EQ(schedule_tasks({"looped-bfs", 4, 16, 3, 0}), 384);
  EXPECT_EQ(schedule_tasks({"interleaved-zb", 4, 16, 3, 0}), 576);
  // The chunked families have no overlapped pairs: the count is the generated one.
  for (const char* name : {"looped-bfs", "interleaved-zb"})
    EXPECT_EQ(schedule_tasks({name, 4, 16, 3, 0}),
              static_cast<double>(generate({name, 4, 16, 3, 0}).action_count()))
        << name;
  EXPECT_EQ(schedule_tasks({"chimera", 4, 16, 0, 0}), 128);
  EXPECT_EQ(schedule_tasks({"zb-h1", 4, 16, 0, 0}), 192);
  EXPECT_EQ(schedule_tasks({"zb-v", 4, 16, 0, 0}), 384);
  EXPECT_EQ(schedule_tasks({"dualpipe", 4, 16, 0, 0}), 192);
  EXPECT_EQ(schedule_tasks({"dualpipev", 4, 16, 0, 0}), 384);
  EXPECT_EQ(schedule_tasks({"v-half", 4, 16, 0, 0}), 384);
  EXPECT_EQ(schedule_tasks({"v-min", 4, 16, 0, 0}), 384);
  EXPECT_EQ(schedule_tasks({"nosuch", 4, 16, 0, 0}), 0);
  // The size a new user asked for: D = 4096, N = 2^20 is beyond any machine.
  EXPECT_GT(estimate_simulate({"1f1b", 4096, 1 << 20, 0, 0}, false).bytes, 1e12);
  EXPECT_GT(estimate_simulate({"1f1b", 64, 64, 0, 0}, true).bytes,
            estimate_simulate({"1f1b", 64, 64, 0, 0}, false).bytes);
}

TEST(ScheduleTasks, SlotRowGeneratorsAddTheirRows) {
  // V-Half and V-Min hold a row of slots per rank beyond their tasks; ZB-V, with as many tasks
  // and the same placement, does not.
  const MemoryEstimate zb_v = estimate_simulate({"zb-v", 64, 64, 0, 0}, false);
  for (const char* name : {"v-half", "v-min"}) {
    const MemoryEstimate e = estimate_simulate({name, 64, 64, 0, 0}, false);
    EXPECT_GT(e.bytes, zb_v.bytes) << name;
    EXPECT_NE(e.detail.find(std::string(name) + "'s 64 rows of"), std::string::npos) << e.detail;
  }
  EXPECT_EQ(zb_v.detail.find("rows of"), std::string::npos) << zb_v.detail;
}

TEST(CpuRunEstimate, CountsOptimizerStatesAndEveryCopyAndGrowsWithCheck) {
  MlpConfig c;
  c.layers = 4;
  c.width = 1024;
  const WorkloadSpec spec = build_mlp(c, 8, DType::kF32);
  const PartitionPlan plan = partition(spec, 2, "balanced");
  const std::vector<double> peaks = {1e6, 1e6};
  const ScheduleParams p{"1f1b", 2, 4, 0, 0};
  const auto bytes = [&](Optimizer o, int copies) {
    return estimate_cpu_run(spec, p, plan, peaks, {.optimizer = o, .copies = copies}).bytes;
  };
  const double params = static_cast<double>(spec.params());
  // f32: values and gradients 4 + 4 bytes, AdamW's m and v 4 + 4 more; the tensors' slack
  // (1.3x) scales each term, so the differences are at least the bytes themselves.
  const double one = bytes(Optimizer::kAdamW, 1);
  EXPECT_GT(one, params * 16);
  EXPECT_GT(one - bytes(Optimizer::kNone, 1), params * 8);
  EXPECT_EQ(bytes(Optimizer::kSgd, 1), bytes(Optimizer::kNone, 1));  // no moments, no master
  EXPECT_GT(bytes(Optimizer::kAdamW, 2) - one, params * 16);         // two chains: every part twice
  const std::string detail =
      estimate_cpu_run(spec, p, plan, peaks, {.optimizer = Optimizer::kAdamW, .copies = 2}).detail;
  EXPECT_NE(detail.find("x 16 bytes"), std::string::npos) << detail;
  EXPECT_NE(detail.find("x 2 copies"), std::string::npos) << detail;
  CpuRunShape check;
  check.check = true;
  EXPECT_GT(estimate_cpu_run(spec, {"1f1b", 2, 4, 0, 0}, plan, peaks, check).bytes, one);
}

TEST(CheckedSizes, OverflowIsRefusedNotWrapped) {
  EXPECT_EQ(checked_mul(3037000499, 3037000499), 9223372030926249001);
  EXPECT_THROW(checked_mul(3037000500, 3037000500), SizeOverflow);
  EXPECT_THROW(checked_add(std::numeric_limits<int64_t>::max(), 1), SizeOverflow);
  Size s = 4294967297;
  EXPECT_THROW(static_cast<void>(s * s), SizeOverflow);
  EXPECT_EQ(static_cast<int64_t>(Size(6) * 7 + 1), 43);

  MlpConfig mlp;
  mlp.width = 4294967297;  // squared: 2^64 + ...
  EXPECT_THROW(build_mlp(mlp, 1, DType::kF32), SizeOverflow);
  mlp.width = 1000000000;  // 8 layers of 10^18 parameters each still fit
  const WorkloadSpec big = build_mlp(mlp, 1, DType::kBF16);
  EXPECT_EQ(big.params(), 7000000017000000010);

  TransformerConfig t = transformer_preset("tiny-llama");
  t.vocab = 1LL << 40;
  t.hidden = 1LL << 30;
  t.heads = 1;
  t.kv_heads = 1;
  EXPECT_THROW(build_transformer(t, 1, DType::kF32), SizeOverflow);

  AmoebaNetConfig a;
  a.filters = 1LL << 40;
  EXPECT_THROW(build_amoebanet(a, 1, DType::kF32), SizeOverflow);
}

}  // namespace
}  // namespace ppbench
