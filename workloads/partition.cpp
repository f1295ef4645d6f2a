#include "workloads/partition.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace ppbench {

double PartitionPlan::max_stage_cost() const {
  double m = 0;
  for (const auto& s : stages) m = std::max(m, s.flops.total());
  return m;
}

namespace {

// runs[i]: the fewest runs of cost at most `limit` that layers 0..i-1 split into, for every i at
// once: packing each run from the left as long as it stays within the limit uses the fewest
// runs, and the packing of a prefix is the packing of the whole cut short. -1 where one layer
// alone costs more than the limit.
std::vector<int> fewest_runs(const std::vector<double>& prefix, double limit) {
  const std::size_t n = prefix.size() - 1;
  std::vector<int> runs(n + 1, 0);
  std::size_t start = 0;
  for (std::size_t end = 1; end <= n; ++end) {
    if (prefix[end] - prefix[end - 1] > limit) return {-1};
    if (runs[end - 1] == 0 || prefix[end] - prefix[start] > limit) {
      runs[end] = runs[end - 1] + 1;
      start = end - 1;
    } else {
      runs[end] = runs[end - 1];
    }
  }
  return runs;
}

bool fits(const std::vector<double>& prefix, double limit, int stages) {
  const std::vector<int> runs = fewest_runs(prefix, limit);
  return runs.front() >= 0 && runs.back() <= stages;
}

}  // namespace

std::vector<int> balanced_partition(const std::vector<double>& cost, int stages) {
  const int n = static_cast<int>(cost.size());
  if (stages < 1 || stages > n)
    throw UsageError("cannot split " + std::to_string(n) + " layers into " +
                     std::to_string(stages) + " stages of at least one layer");
  std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  auto range = [&](int i, int j) { return prefix[j] - prefix[i]; };  // layers i..j-1

  // The optimum, the least largest stage cost: the least limit within which `stages` runs
  // suffice (as many runs as stages or fewer, since a run of two or more layers splits without
  // growing). Stage costs are differences of the same prefix sums the runs are checked with, so
  // the optimum is one of those doubles, and non-negative doubles order as their bit patterns:
  // bisecting the patterns finds it exactly in at most 64 passes of O(layers), where a table
  // of the best cost per (stages, prefix) would need stages x layers doubles (32 GB at 4096
  // stages of a million layers).
  std::uint64_t lo = 0, hi = std::bit_cast<std::uint64_t>(prefix[static_cast<std::size_t>(n)]);
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (fits(prefix, std::bit_cast<double>(mid), stages))
      hi = mid;
    else
      lo = mid + 1;
  }
  const double target = std::bit_cast<double>(lo);
  const std::vector<int> runs = fewest_runs(prefix, target);

  // Rebuild from the last stage, each taking the longest run that keeps the rest feasible:
  // layers 0..i-1 fill k stages within the optimum when i >= k and runs[i] <= k. The run
  // i..j-1 fits from the least i whose cost is within it (costs fall as i grows), and runs[i]
  // only grows with i, so that least i is the stage's start. Later stages so get as many layers
  // as the optimum allows: under 1F1B-like schedules early stages hold more micro-batches.
  std::vector<int> counts(static_cast<std::size_t>(stages));
  int j = n;
  for (int k = stages - 1; k > 0; --k) {
    int i = k, hi_i = j - 1;  // the stage holds at least one layer, and k stages precede it
    while (i < hi_i) {
      const int mid = i + (hi_i - i) / 2;
      if (range(mid, j) > target)
        i = mid + 1;
      else
        hi_i = mid;
    }
    if (range(i, j) > target || runs[static_cast<std::size_t>(i)] > k)
      throw std::logic_error("balanced_partition: no feasible start for stage " +
                             std::to_string(k));
    counts[static_cast<std::size_t>(k)] = j - i;
    j = i;
  }
  counts[0] = j;
  return counts;
}

std::vector<int> uniform_partition(int layers, int stages) {
  std::vector<int> counts(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++counts[s];
  return counts;
}

std::vector<int> explicit_partition(std::string_view list, int layers, int stages) {
  const std::string text(list);
  std::vector<int> counts;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    std::string entry =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    entry.erase(0, entry.find_first_not_of(' '));
    entry.erase(entry.find_last_not_of(' ') + 1);
    const bool digits = !entry.empty() && entry.size() <= 9 &&
                        std::all_of(entry.begin(), entry.end(),
                                    [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits)
      throw UsageError("--partition " + quoted(text) + ": entry " + quoted(entry) +
                       " is not a layer count (expected e.g. 4,4,3,5)");
    const int v = std::stoi(entry);
    if (v < 1)
      throw UsageError("--partition " + quoted(text) + ": entry " + entry +
                       " is not allowed, every stage needs at least one layer");
    counts.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (static_cast<int>(counts.size()) != stages)
    throw UsageError("--partition " + quoted(text) + " has " + std::to_string(counts.size()) +
                     " entries but the pipeline has " + std::to_string(stages) + " stages");
  int64_t sum = 0;  // entries of up to 9 digits: an int could overflow
  for (int c : counts) sum += c;
  if (sum != layers)
    throw UsageError("--partition " + quoted(text) + " sums to " + std::to_string(sum) +
                     " layers but the workload has " + std::to_string(layers));
  return counts;
}

int stages_in_list(std::string_view method) {
  if (method == "balanced" || method == "uniform" || method.empty()) return 0;
  return static_cast<int>(std::count(method.begin(), method.end(), ',')) + 1;
}

namespace {
bool is_layer_list(std::string_view method) {
  return !method.empty() && std::isdigit(static_cast<unsigned char>(method[0]));
}
void check_method_name(std::string_view method) {
  if (method != "balanced" && method != "uniform" && !is_layer_list(method))
    throw UsageError("unknown --partition " + quoted(method) +
                     " (allowed: balanced, uniform, or layer counts such as 4,4,3,5)");
}
}  // namespace

void check_partition_method(std::string_view method, int layers) {
  check_method_name(method);
  if (is_layer_list(method)) explicit_partition(method, layers, stages_in_list(method));
}

void require_layers_for_stages(const std::string& workload, std::int64_t layers, int stages) {
  if (layers >= stages) return;
  throw UsageError("workload " + workload + " has " + std::to_string(layers) +
                   " layers, fewer than the pipeline's " + std::to_string(stages) + " stages" +
                   " (every stage needs at least one layer)");
}

PartitionPlan partition(const WorkloadSpec& spec, int stages, std::string_view method) {
  const int n = static_cast<int>(spec.layers.size());
  if (stages < 1)
    throw UsageError("--stages " + std::to_string(stages) + " is not allowed: it must be >= 1");
  check_method_name(method);
  require_layers_for_stages(spec.workload, n, stages);

  PartitionPlan plan;
  if (method == "balanced") {
    std::vector<double> cost;
    for (const auto& l : spec.layers) cost.push_back(l.flops.total());
    plan.method = "balanced";
    plan.layer_counts = balanced_partition(cost, stages);
  } else if (method == "uniform") {
    plan.method = "uniform";
    plan.layer_counts = uniform_partition(n, stages);
  } else {
    plan.method = "explicit";
    plan.layer_counts = explicit_partition(method, n, stages);
  }

  int first = 0;
  for (int s = 0; s < stages; ++s) {
    StageSpec st;
    st.first_layer = first;
    st.num_layers = plan.layer_counts[s];
    for (int i = first; i < first + st.num_layers; ++i) {
      const LayerSpec& l = spec.layers[i];
      st.params += l.params;
      st.flops += l.flops;
      st.activation += l.activation;
    }
    first += st.num_layers;
    if (s + 1 < stages) st.boundary_bytes_out = spec.layers[first - 1].boundary_bytes();
    plan.stages.push_back(st);
  }
  return plan;
}

}  // namespace ppbench
