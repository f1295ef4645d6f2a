// What a command will need in memory, estimated from its parameters before it allocates, and the
// bar it must stay under: the machine's available memory (MemAvailable in /proc/meminfo, or the
// cgroup's limit or the address-space limit where that is lower) or `--max-memory BYTES`. A size
// that cannot fit is refused with one line naming the options, the estimate and the bar
// (UsageError, exit 2): the user asked for it, and nothing has been spent on it yet.
//
// The per-action and per-layer figures are peak resident bytes measured with /usr/bin/time -v
// (see the constants in memory_estimate.cpp), rounded up.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/step_memory.h"
#include "schedules/lower.h"
#include "schedules/schedule.h"
#include "workloads/layer_spec.h"
#include "workloads/partition.h"

namespace ppbench {

struct MemoryBudget {
  double bytes = 0;    // 0: unknown, nothing is refused
  std::string source;  // "available (MemAvailable in /proc/meminfo)", "--max-memory 64G"
  // Under an address-space limit (ulimit -v): what is left of it, 0 where there is none (or
  // --max-memory set the bar). It counts what a run's threads map beyond their tensors too.
  double address_space = 0;
};

// A thread's mappings beyond its tensors: its stack, the malloc arena glibc reserves for it and
// OpenBLAS's GEMM buffer. Measured as VmPeak's growth per rank thread (run -w mlp --width 1024,
// 1f1b, D = 2 -> 4: +417 MiB, while the resident size grew 26 MiB), with some room. Under
// ulimit -v a GEMM whose buffer cannot be mapped does not fail: OpenBLAS retries for ever.
inline constexpr double kThreadAddressSpace = 224.0 * 1024 * 1024;

// The "MemAvailable:" line of /proc/meminfo's text, in bytes; 0 when absent.
double meminfo_available_bytes(std::string_view meminfo);
// The machine's available memory: MemAvailable, or the cgroup's memory.max less memory.current,
// or the address-space limit (ulimit -v) less what the process maps, where that is lower; bytes
// 0 when none can be read.
MemoryBudget available_memory();

// "64G", "1.5T", "512MiB", "4096" (bytes). K, M, G, T, P (optionally followed by B or iB, any
// case) are powers of 1024. UsageError naming `flag` for anything else, zero, or past 2^63.
double parse_byte_size(std::string_view text, std::string_view flag = "--max-memory");

// --max-memory when given (non-empty), the available memory otherwise.
MemoryBudget memory_budget(const std::string& max_memory);

// "1.50 GiB", "640 B".
std::string bytes_text(double bytes);

struct MemoryEstimate {
  double bytes = 0;
  std::string detail;  // how it was reckoned, e.g. "8.6e+09 actions x 180 bytes"
};

// Throws UsageError when `e` is larger than the budget (or not finite):
// "<what> needs about 1.3 TiB of memory (<detail>), more than the 21.9 GiB available
// (MemAvailable in /proc/meminfo); use smaller sizes or --max-memory BYTES".
void require_memory(const MemoryBudget& budget, const MemoryEstimate& e, const std::string& what);
// Under an address-space limit, the same for `e` and the mappings of `threads` threads
// (kThreadAddressSpace each) beside it.
void require_address_space(const MemoryBudget& budget, const MemoryEstimate& e, int threads,
                           const std::string& what);

// F, B, I and W tasks of a schedule (an overlapped pair counts as two), from its parameters
// alone: stage-micro-batch pairs (D N; v D N interleaved; 2 D N for the V shapes) times 2, or 3
// where the family splits the backward (ScheduleInfo::backward). 0 for a name the registry does
// not know: an unknown family (the generator names it) or a schedule file ("file:...").
double schedule_tasks(const ScheduleParams& p);

// `simulate` (generate, validate, simulate, metrics; with `trace_out` the Chrome trace as a JSON
// tree and its text).
MemoryEstimate estimate_simulate(const ScheduleParams& p, bool trace_out);
// What `simulate` without a trace touches in practice (not a bound: see estimate_simulate).
double simulate_touched_bytes(const ScheduleParams& p);
// `show --format text|lowered|grid` up to the grid itself (see estimate_grid).
MemoryEstimate estimate_show(const ScheduleParams& p, std::string_view format);
// The time-step grid of `ranks` rows and `steps` columns of cells `width` characters wide.
MemoryEstimate estimate_grid(int ranks, double steps, std::size_t width);
// A workload spec of `layers` layers and its table or JSON (`model`). Its partition holds a few
// numbers per layer (the balanced one too: workloads/partition.h), inside the per-layer figure.
MemoryEstimate estimate_spec(double layers, bool json);
// tune, while it costs one micro-batch size: that size's spec and `cuts` cuts of it (a spec copy
// and plan each, one per stage count).
MemoryEstimate estimate_tune_size(double layers, double cuts);

// The float64 single-device step (run --check's reference, and the copies that measure its
// spread), one micro-batch at a time: `arrays` float64 arrays the size of the parameters
// (values, gradients, moments, kept gradients) and one micro-batch's activations through the
// whole model.
double float64_step_bytes(const WorkloadSpec& spec, int arrays);

// `run --backend cpu`: parameters and gradients in the dtype (twice for chimera and dualpipe,
// which hold two copies of each stage), the memory model's peak activations per rank (and with
// --recompute the largest stage rebuilt), the micro-batches' data, the boundary tensors in the
// mailboxes, each rank's working set of its largest layer, the per-(micro-batch, layer) records,
// the schedule and its trace, and with --check the float64 single-device step. `peaks` are
// predicted_peak_bytes() per rank.
struct CpuRunShape {
  bool recompute = false;
  bool check = false;
  int channel_capacity = 0;  // 0: the schedule's default, bounded here by N messages a mailbox
  Optimizer optimizer = Optimizer::kAdamW;  // its states are held beside the parameters
  int copies = 1;  // copies of each part the ranks hold (2: Chimera's and DualPipe's chains)
};
MemoryEstimate estimate_cpu_run(const WorkloadSpec& spec, const ScheduleParams& p,
                                const PartitionPlan& plan, const std::vector<double>& peaks,
                                const CpuRunShape& o);

}  // namespace ppbench
