#include "workloads/partition.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/error.h"

namespace ppbench {

double PartitionPlan::max_stage_cost() const {
  double m = 0;
  for (const auto& s : stages) m = std::max(m, s.flops.total());
  return m;
}

std::vector<int> balanced_partition(const std::vector<double>& cost, int stages) {
  const int n = static_cast<int>(cost.size());
  if (stages < 1 || stages > n)
    throw UsageError("cannot split " + std::to_string(n) + " layers into " +
                     std::to_string(stages) + " stages of at least one layer");
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  auto range = [&](int i, int j) { return prefix[j] - prefix[i]; };  // layers i..j-1

  // best[k][j]: the smallest possible largest stage cost of layers 0..j-1 in k+1 stages. It is
  // non-decreasing in j, and range(i, j) is non-increasing in i, so the best split point of
  // max(best[k-1][i], range(i, j)) is where the two cross: found by binary search.
  std::vector<std::vector<double>> best(stages, std::vector<double>(n + 1, 0.0));
  for (int j = 1; j <= n; ++j) best[0][j] = range(0, j);
  for (int k = 1; k < stages; ++k) {
    for (int j = k + 1; j <= n; ++j) {
      int lo = k, hi = j - 1;  // split i in [k, j-1]: k stages hold 0..i-1, one holds i..j-1
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (best[k - 1][mid] >= range(mid, j))
          hi = mid;
        else
          lo = mid + 1;
      }
      double v = std::max(best[k - 1][lo], range(lo, j));
      if (lo > k) v = std::min(v, std::max(best[k - 1][lo - 1], range(lo - 1, j)));
      best[k][j] = v;
    }
  }

  // Rebuild from the last stage, each taking the longest run that keeps the prefix feasible.
  const double target = best[stages - 1][n];
  std::vector<int> counts(stages);
  int j = n;
  for (int k = stages - 1; k > 0; --k) {
    int i = k;
    while (range(i, j) > target || best[k - 1][i] > target) ++i;
    counts[k] = j - i;
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
