#include "harness/memory_estimate.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "harness/table_unit.h"
#include "schedules/registry.h"

namespace ppbench {

namespace {

// Peak resident bytes per F/B/I/W task, measured with /usr/bin/time -v on ppbench as it was
// (Release, 2 cores; the resident size of `simulate -d 2 -n 4`, 215 MB of libraries, taken off):
//   simulate (text or json)  30-150 bytes per task, growing with the size (1f1b D=64 N=65536:
//                            145; interleaved-1f1b D=256 N=4096 v=8: 148; gpipe D=512 N=16384:
//                            149; zb-v D=64 N=32768: 125)
//   simulate --trace-out     2400-2850 bytes per task (1f1b D=64 N=4096: 2755; zb-v D=64
//                            N=4096: 2482): the trace as a JSON tree, then its text
//   show (text)              35-38 bytes per task; --format lowered 175-225
//   show --format grid       the simulation without comm events, plus the grid's cells
// The constants round these up. Since simulate streams its metrics without keeping events and
// packs a task into 8 bytes, it takes about 31 bytes per task (1f1b D=256 N=8192, at 8f20789):
// kSimulateBytesPerTask is now a generous bound, kept because `run` and `show --format grid`
// still hold the trace it was measured with.
constexpr double kSimulateBytesPerTask = 180;
// What a metrics-only simulate actually touches, measured as peak resident memory above the
// process's own (1f1b D=64 N=1024: 24.0 bytes per task; D=256 N=8192: 25.2): the schedule (16),
// the end times (8 per F and per B or I) and the validator's flags. Not rounded up: it sizes
// the heap prefault, where more is wasted work.
constexpr double kSimulateTouchedBytesPerTask = 24;
constexpr double kTraceBytesPerTask = 3200;
constexpr double kShowTextBytesPerTask = 48;
constexpr double kShowLoweredBytesPerTask = 280;
constexpr double kGridSimulateBytesPerTask = 160;
constexpr double kGridBytesPerCell = 48;  // a std::string per cell, then the text
// `model`: a layer's LayerSpec, its table row and text, 590 (mlp), 1060 (transformer) and
// 1340 (amoebanet) bytes per layer; as JSON 6000, 7260 and 9200.
constexpr double kSpecTextBytesPerLayer = 1600;
constexpr double kSpecJsonBytesPerLayer = 10000;
// `run`: a spec's layer without its table, and each (micro-batch, layer) record a rank keeps.
constexpr double kSpecBytesPerLayer = 1600;
constexpr double kSavedBytesPerLayerMicrobatch = 128;

std::string read_text(const char* path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double cgroup_number(const std::string& text) {
  double v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  while (e > b && std::isspace(static_cast<unsigned char>(e[-1]))) --e;
  auto [end, ec] = std::from_chars(b, e, v);
  return ec == std::errc() && end == e && std::isfinite(v) && v > 0 ? v : 0;
}

std::string num_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// V-Half and V-Min (ScheduleInfo::packs_slot_rows) squeeze each rank's passes on a row of slots as
// long as the whole schedule (about 6 (D + N) slots: v_memory.cpp's RankMemory, a max-tree over it
// and the rows of taken slots), every rank's row at once: D^2 growth that the per-task figures do
// not cover.
constexpr double kVMemoryBytesPerSlot = 24;

// The estimate with the generator's own working set added, where it has one beyond its tasks.
MemoryEstimate with_generator(MemoryEstimate e, const ScheduleParams& p) {
  const ScheduleInfo* info = lookup_schedule(p.name);
  if (info == nullptr || !info->packs_slot_rows) return e;
  const double slots = 6.0 * (static_cast<double>(p.devices) + p.microbatches);
  const double bytes = p.devices * slots * kVMemoryBytesPerSlot;
  e.bytes += bytes;
  e.detail += " + " + p.name + "'s " + std::to_string(p.devices) + " rows of " + num_text(slots) +
              " slots x " + num_text(kVMemoryBytesPerSlot) + " bytes";
  return e;
}

}  // namespace

namespace {

// The bytes of a "Key:   123 kB" line of a /proc file (meminfo, status); 0 when absent.
double kb_field_bytes(std::string_view text, std::string_view key) {
  const std::size_t at = text.find(key);
  if (at == std::string_view::npos) return 0;
  std::size_t i = at + key.size();
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  double kb = 0;
  auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), kb);
  // from_chars also reads "nan" and "inf": neither is a count of bytes.
  if (ec != std::errc() || !std::isfinite(kb) || kb < 0) return 0;
  return kb * 1024;
}

}  // namespace

double meminfo_available_bytes(std::string_view meminfo) {
  return kb_field_bytes(meminfo, "MemAvailable:");
}

namespace {

// A value of a "key value" line of a cgroup's memory.stat; 0 when absent.
double stat_value(const std::string& stat, std::string_view key) {
  std::size_t at = 0;
  while ((at = stat.find(key, at)) != std::string::npos) {
    const bool line_start = at == 0 || stat[at - 1] == '\n';
    const std::size_t after = at + key.size();
    if (line_start && after < stat.size() && stat[after] == ' ') {
      const std::size_t eol = stat.find('\n', after);
      return cgroup_number(
          stat.substr(after + 1, eol == std::string::npos ? eol : eol - after - 1));
    }
    at = after;
  }
  return 0;
}

// What the cgroup lets this process still take: its limit less its usage, counting inactive file
// pages (which the kernel reclaims before it kills) as free. 0 when there is no limit.
double cgroup_room(const char* limit_path, const char* usage_path, const char* stat_path,
                   std::string_view inactive_key) {
  const double limit = cgroup_number(read_text(limit_path));  // "max" (no limit) reads as 0
  if (limit <= 0 || limit >= 1e18) return 0;                  // v1 writes ~2^63 for no limit
  const double used = cgroup_number(read_text(usage_path));
  const double reclaimable = stat_value(read_text(stat_path), inactive_key);
  return std::max(limit - used + reclaimable, 1.0);
}

// Under an address-space limit (ulimit -v, RLIMIT_AS) an allocation past it fails whatever the
// machine has free: what is left of it is the limit less what the process maps now (VmSize).
// 0 when there is none.
double address_space_room() {
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 0;
  const double mapped = kb_field_bytes(read_text("/proc/self/status"), "VmSize:");
  return std::max(static_cast<double>(lim.rlim_cur) - mapped, 1.0);
}

}  // namespace

MemoryBudget available_memory() {
  MemoryBudget b;
  b.bytes = meminfo_available_bytes(read_text("/proc/meminfo"));
  b.source = "available (MemAvailable in /proc/meminfo)";
  b.address_space = address_space_room();
  // A container's limit is what the kernel kills at, whatever the machine has free.
  for (const auto& [room, source] :
       {std::pair{cgroup_room("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current",
                              "/sys/fs/cgroup/memory.stat", "inactive_file"),
                  "available (the cgroup's memory.max less its usage)"},
        std::pair{cgroup_room("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                              "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                              "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"),
                  "available (the cgroup's memory.limit_in_bytes less its usage)"},
        std::pair{b.address_space,
                  "available (the address-space limit, ulimit -v, less what ppbench maps)"}}) {
    if (room > 0 && (b.bytes == 0 || room < b.bytes)) {
      b.bytes = room;
      b.source = source;
    }
  }
  return b;
}

double parse_byte_size(std::string_view text, std::string_view flag) {
  auto bad = [&](const std::string& why) {
    throw UsageError(std::string(flag) + " " + quoted(text) + " " + why +
                     " (allowed: a byte count such as 4096, or with a suffix K, M, G, T, P "
                     "(powers of 1024), e.g. 512M, 64G, 1.5T)");
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) bad("is not a size");
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, v);
  if (ec != std::errc() || end != text.data() + i || !std::isfinite(v)) bad("is not a size");
  std::string suffix;
  for (char c : text.substr(i))
    suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() > 1 && (suffix.ends_with("IB") || suffix.ends_with("B")))
    suffix = suffix.substr(0, suffix.size() - (suffix.ends_with("IB") ? 2 : 1));
  static constexpr std::string_view kUnits = "KMGTP";
  double scale = 1;
  if (suffix == "B" || suffix.empty()) {
    scale = 1;
  } else if (suffix.size() == 1 && kUnits.find(suffix[0]) != std::string_view::npos) {
    scale = std::pow(1024.0, static_cast<double>(kUnits.find(suffix[0]) + 1));
  } else {
    bad("has an unknown unit");
  }
  const double bytes = v * scale;
  if (!(bytes >= 1)) bad("is not allowed: it must be at least 1 byte");
  if (bytes > 9.2e18) bad("is too large: it must be below 8192P (2^63 bytes)");
  return std::floor(bytes);
}

MemoryBudget memory_budget(const std::string& max_memory) {
  if (max_memory.empty()) return available_memory();
  return {parse_byte_size(max_memory), "allowed by --max-memory " + max_memory};
}

std::string bytes_text(double bytes) {
  const Unit u = byte_unit(std::fabs(bytes));
  char buf[48];
  if (u.scale == 1)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, "%.3g %s", bytes / u.scale, u.name);
  return buf;
}

void require_memory(const MemoryBudget& budget, const MemoryEstimate& e, const std::string& what) {
  if (budget.bytes <= 0) return;  // unknown: nothing to compare with
  if (std::isfinite(e.bytes) && e.bytes <= budget.bytes) return;
  const std::string need =
      std::isfinite(e.bytes) ? "about " + bytes_text(e.bytes) : "more than can be counted";
  throw UsageError(what + " needs " + need + " of memory (" + e.detail + "), more than the " +
                   bytes_text(budget.bytes) + " " + budget.source +
                   "; use smaller sizes, or --max-memory BYTES to set the bar");
}

void require_address_space(const MemoryBudget& budget, const MemoryEstimate& e, int threads,
                           const std::string& what) {
  if (budget.address_space <= 0) return;
  const double mapped = threads * kThreadAddressSpace;
  const MemoryBudget room{budget.address_space,
                          "left of the address-space limit (ulimit -v) less what ppbench maps"};
  const std::string threads_detail = std::to_string(threads) +
                                     " threads' stacks, malloc arenas and GEMM buffers " +
                                     bytes_text(mapped);
  require_memory(room, {e.bytes + mapped, e.detail + ", and " + threads_detail}, what);
}

double schedule_tasks(const ScheduleParams& p) {
  // Only a family's parameters give its tasks; a file's ("file:...") are in the file.
  const ScheduleInfo* info = lookup_schedule(p.name);
  if (info == nullptr) return 0;
  // (stage, micro-batch) pairs from the family's stage layout; two-chain layouts carry N/2
  // micro-batches on each of their two chains of D stages, N stage-passes per stage in all.
  const double pairs = static_cast<double>(layout_stages_per_chain(p)) * p.microbatches;
  return pairs * (info->backward == Backward::kSplit ? 3 : 2);
}

MemoryEstimate estimate_simulate(const ScheduleParams& p, bool trace_out) {
  const double tasks = schedule_tasks(p);
  const double per = trace_out ? kTraceBytesPerTask : kSimulateBytesPerTask;
  return with_generator({tasks * per, num_text(tasks) + " actions x " + num_text(per) + " bytes" +
                                          (trace_out ? " with the trace" : "")},
                        p);
}

double simulate_touched_bytes(const ScheduleParams& p) {
  return schedule_tasks(p) * kSimulateTouchedBytesPerTask;
}

MemoryEstimate estimate_show(const ScheduleParams& p, std::string_view format) {
  const double tasks = schedule_tasks(p);
  const double per = format == "lowered" ? kShowLoweredBytesPerTask
                     : format == "grid"  ? kGridSimulateBytesPerTask
                                         : kShowTextBytesPerTask;
  return with_generator({tasks * per, num_text(tasks) + " actions x " + num_text(per) + " bytes"},
                        p);
}

MemoryEstimate estimate_grid(int ranks, double steps, std::size_t width) {
  const double cells = static_cast<double>(ranks) * steps;
  const double per = kGridBytesPerCell + static_cast<double>(width);
  return {cells * per, "a grid of " + std::to_string(ranks) + " ranks x " + num_text(steps) +
                           " time steps x " + num_text(per) + " bytes"};
}

MemoryEstimate estimate_spec(double layers, bool json) {
  const double per = json ? kSpecJsonBytesPerLayer : kSpecTextBytesPerLayer;
  return {layers * per, num_text(layers) + " layers x " + num_text(per) + " bytes"};
}

MemoryEstimate estimate_tune_size(double layers, double cuts) {
  MemoryEstimate e = estimate_spec(layers, false);
  e.bytes += cuts * layers * kSpecTextBytesPerLayer;
  e.detail = num_text(1 + cuts) + " specs of " + e.detail;
  return e;
}

double float64_step_bytes(const WorkloadSpec& spec, int arrays) {
  const ActivationBytes a = spec.activation();
  return static_cast<double>(spec.params()) * 8 * arrays +
         (static_cast<double>(a.b) + static_cast<double>(a.w)) * 8 / dtype_bytes(spec.dtype);
}

MemoryEstimate estimate_cpu_run(const WorkloadSpec& spec, const ScheduleParams& p,
                                const PartitionPlan& plan, const std::vector<double>& peaks,
                                const CpuRunShape& o) {
  const double e = dtype_bytes(spec.dtype);
  const double n = p.microbatches;
  const double layers = static_cast<double>(spec.layers.size());
  const double copies = std::max(o.copies, 1);
  const double params = static_cast<double>(spec.params());
  // Values, gradients and the optimizer's states, per held copy (step_memory.h's convention).
  const ParameterBytes per = parameter_bytes(spec.dtype, o.optimizer);
  const double per_param = static_cast<double>(per.param + per.grad + per.optimizer);
  const double weights = params * per_param * copies;
  double activations = 0;
  for (double b : peaks) activations += b;
  double largest_layer = 0, boundary = 0;
  for (const LayerSpec& l : spec.layers) {
    largest_layer = std::max(largest_layer, static_cast<double>(l.activation.b + l.activation.w) +
                                                2.0 * static_cast<double>(l.boundary_bytes()));
  }
  for (const StageSpec& st : plan.stages) boundary += static_cast<double>(st.boundary_bytes_out);
  const double ranks = static_cast<double>(std::max<std::size_t>(peaks.size(), 1));
  // Inputs and labels of every micro-batch, as values of the dtype (token ids too).
  auto elements = [](const TensorSpec& t) {
    double k = 1;
    for (int64_t d : t.shape) k *= static_cast<double>(d);
    return k;
  };
  double sample = elements(spec.input);
  for (const TensorSpec& t : spec.labels) sample += elements(t);
  const double data = n * sample * std::max(e, 4.0);
  // Activations and gradients waiting in the mailboxes between stages (both directions).
  const double held =
      o.channel_capacity > 0 ? std::min(n, static_cast<double>(o.channel_capacity)) : n;
  const double in_flight = 2 * copies * boundary * held;
  // Each rank's largest layer at work: its kept tensors, its input and output and their gradients.
  const double working = ranks * largest_layer;
  const double records =
      n * layers * kSavedBytesPerLayerMicrobatch * copies + layers * kSpecBytesPerLayer;
  const double schedule =
      schedule_tasks(p) * kSimulateBytesPerTask * 2;  // the step's trace and its replay
  // Gradient statistics: one tensor at a time in float64, or all of them with --check.
  double summary = 0;
  for (const LayerSpec& l : spec.layers)
    summary = std::max(summary, static_cast<double>(l.params) * 8);
  double check = 0;
  if (o.check) {
    // Float64 parameters, gradients, the reference's kept gradients and the run's, and the run's
    // first step's (kept where it takes more than one step: cpu_check).
    check = float64_step_bytes(spec, 5);
    summary = 0;
  }
  MemoryEstimate est;
  // Measured against /usr/bin/time -v (mlp, transformer, amoebanet under gpipe, 1f1b, zb-h1,
  // interleaved-1f1b, chimera, dualpipev, with --recompute and --check): the resident size is the
  // tensors above plus what glibc's allocator keeps of freed activations (its mmap threshold
  // rises after the first large free, so later tensors come from per-thread heaps that are not
  // given back): up to 2.3x the memory model's activation peak (mlp, gpipe, D = 4, N = 32,
  // b = 256; 1.1x with MALLOC_MMAP_THRESHOLD_ fixed), and 1.2x the rest.
  constexpr double kActivationSlack = 2.5, kTensorSlack = 1.3;
  est.bytes = kActivationSlack * activations +
              kTensorSlack * (weights + data + in_flight + working + check) + records + schedule +
              summary;
  est.detail = num_text(params) + " parameters x " + num_text(per_param) +
               " bytes (values, gradients, optimizer states)" +
               (copies > 1 ? " x " + num_text(copies) + " copies" : "") + " = " +
               bytes_text(weights) + ", peak activations " + bytes_text(activations) + ", data " +
               bytes_text(data) + ", transfers and working set " + bytes_text(in_flight + working) +
               (o.check ? ", --check " + bytes_text(check) : "");
  return est;
}

}  // namespace ppbench
