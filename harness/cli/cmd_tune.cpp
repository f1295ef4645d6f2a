// `ppbench tune`: which schedule, chunks and micro-batch count to run a workload with on D ranks
// under a per-rank activation memory limit, by simulating every candidate (tune_search.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#include "harness/cli/simulate_workload.h"
#include "harness/cli/tune_search.h"
#include "harness/memory_estimate.h"
#include "harness/provenance.h"
#include "workloads/spec_json.h"

namespace ppbench::cli {

namespace {

// Past this many tasks' worth of work (about a minute; candidate_tasks counts v-half and v-min's
// generation at its cost) the search is refused up front.
constexpr double kMaxSearchTasks = 2e8;

nlohmann::json candidate_json(const TuneCandidate& c, int rank) {
  nlohmann::json j = {{"schedule", c.schedule},
                      {"chunks", c.chunks},
                      {"microbatches", c.microbatches},
                      {"microbatch_size", c.microbatch_size},
                      {"status", status_name(c.status)}};
  if (rank > 0) j["rank"] = rank;
  if (!c.reason.empty()) j["reason"] = c.reason;
  if (c.status != TuneStatus::kInvalid) {
    j["makespan"] = c.makespan;
    j["bubble_fraction"] = c.bubble_fraction;
    j["peak_bytes"] = c.peak_bytes;
    j["max_peak_bytes"] = c.max_peak_bytes();
  }
  return j;
}

std::string peaks_text(const TuneCandidate& c) {
  std::string s;
  for (double b : c.peak_bytes) s += (s.empty() ? "" : ", ") + bytes_text(b);
  return s;
}

void print_text(const std::vector<TuneCandidate>& all,
                const std::vector<const TuneCandidate*>& best, std::size_t top,
                const TuneSpace& space, const WorkloadCosts& w, const std::string& workload,
                double seconds) {
  std::string ns;
  for (int n : space.microbatch_counts) ns += (ns.empty() ? "" : ",") + std::to_string(n);
  std::cout << "tune " << workload << " on D=" << space.devices << ", global batch "
            << space.global_batch << " (N in {" << ns << "}), memory limit "
            << bytes_text(w.memory_limit) << " per rank, device profile " << w.profile.name << '\n';
  std::map<TuneStatus, std::vector<const TuneCandidate*>> by;
  for (const TuneCandidate& c : all) by[c.status].push_back(&c);
  std::printf("%zu candidates searched in %.3g s: %zu fit, %zu over memory, %zu invalid\n\n",
              all.size(), seconds, by[TuneStatus::kFits].size(), by[TuneStatus::kOverMemory].size(),
              by[TuneStatus::kInvalid].size());
  if (best.empty()) {
    std::cout << "no candidate fits --memory-limit-bytes " << bytes_text(w.memory_limit) << '\n';
  } else {
    std::printf("%4s  %-18s %2s %5s %6s %12s %8s  %s\n", "rank", "schedule", "v", "N", "b",
                "step (s)", "bubble", "peak activation bytes per rank");
    for (std::size_t k = 0; k < best.size() && k < top; ++k) {
      const TuneCandidate& c = *best[k];
      std::printf("%4zu  %-18s %2s %5d %6lld %12.6g %8.4f  %s\n", k + 1, c.schedule.c_str(),
                  c.chunks > 0 ? std::to_string(c.chunks).c_str() : "-", c.microbatches,
                  static_cast<long long>(c.microbatch_size), c.makespan, c.bubble_fraction,
                  peaks_text(c).c_str());
    }
  }
  // Why the others lost, a few examples each.
  constexpr std::size_t kExamples = 3;
  std::cout << "\nwhy the others lost:\n";
  const std::size_t slower = best.size() > top ? best.size() - top : 0;
  std::printf("  slower: %zu\n", slower);
  for (std::size_t k = top; k < best.size() && k < top + kExamples; ++k)
    std::printf("    %s: %.6g s (%.3gx the best)\n", best[k]->label().c_str(), best[k]->makespan,
                best[k]->makespan / best[0]->makespan);
  // Over memory: those nearest to fitting, which a slightly larger limit would admit.
  auto over = by[TuneStatus::kOverMemory];
  std::stable_sort(over.begin(), over.end(), [](const TuneCandidate* a, const TuneCandidate* b) {
    return a->max_peak_bytes() < b->max_peak_bytes();
  });
  std::printf("  over memory: %zu\n", over.size());
  for (std::size_t k = 0; k < over.size() && k < kExamples; ++k)
    std::cout << "    " << over[k]->label() << ": " << over[k]->reason << '\n';
  // Invalid: one example per family, as a family usually refuses several N or v for one reason.
  const auto& invalid = by[TuneStatus::kInvalid];
  std::printf("  invalid: %zu\n", invalid.size());
  std::size_t shown = 0;
  for (std::size_t k = 0; k < invalid.size() && shown < kExamples; ++k)
    if (k == 0 || invalid[k]->schedule != invalid[k - 1]->schedule) {
      std::cout << "    " << invalid[k]->label() << ": " << invalid[k]->reason << '\n';
      ++shown;
    }
}

}  // namespace

Command add_tune(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "tune",
      "Search schedules, chunks and micro-batch counts for a workload on D ranks under a "
      "per-rank limit on activation memory; print the fastest by simulated step time");
  struct State {
    WorkloadCostFlags workload;
    int devices = 0;
    std::int64_t global_batch = 0;
    int top = 5;
    std::string format = "text";
    MemoryFlag memory;
    CLI::Option* global_batch_option = nullptr;
  };
  auto st = std::make_shared<State>();
  st->workload.add_to(*app);
  st->workload.workload_option->required(true)->description(
      "The workload to tune for (mlp, amoebanet or transformer): its FLOPs and bytes at "
      "--device-profile's rates give each candidate's per-stage costs");
  st->workload.limit_option->required(true);
  st->workload.limit_option->description(
      "Activation bytes each rank may hold (e.g. 512M, 16G); candidates over it are excluded. "
      "In bytes, unlike zb-1p/zb-2p's --memory-limit of simulate (units of M_B)");
  app->get_option("--microbatch-size")
      ->description(
          "Samples per micro-batch when --global-batch is not given: B defaults to 8 D b, so "
          "the largest N tried (8 D) runs micro-batches of b (default 1)");
  app->add_option("-d,--devices", st->devices, "Pipeline ranks D")
      ->required()
      ->transform(integer_in(1, 4096));
  st->global_batch_option =
      app->add_option("--global-batch", st->global_batch,
                      "Samples per training step B, split into N micro-batches of B/N samples "
                      "for every divisor N of B with D <= N <= 8 D (default 8 D b)")
          ->transform(integer_in(1, std::int64_t{1} << 40));
  app->add_option("--top", st->top, "How many of the fastest candidates to print (default 5)")
      ->transform(integer_in(1, 100000));
  app->add_option("--format", st->format, "text, or json (every candidate with its status)")
      ->check(one_of({"text", "json"}));
  st->memory.add_to(*app);
  app->footer(
      "Every registered family x chunks v in 1..4 (families with chunks) x N, each generated, "
      "simulated\nwith the workload's per-stage costs (as simulate --workload) and checked "
      "against the limit.\nExample: ppbench tune --workload mlp --layers 16 --width 1024 -d 4 "
      "--memory-limit-bytes 64M");
  return [st, app] {
    const auto* mb_option = app->get_option("--microbatch-size");
    if (st->global_batch_option->count() > 0 && mb_option->count() > 0)
      throw UsageError(
          "--microbatch-size does not go with --global-batch: tune splits the global batch B "
          "into N micro-batches of B/N samples (give one of them)");
    const MemoryBudget budget = st->memory.budget();
    TuneSpace space;
    space.devices = st->devices;
    if (st->global_batch_option->count() > 0) {
      space.global_batch = st->global_batch;
    } else {
      // 8 D b, bounded as --global-batch is (and before it can overflow).
      constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 40;
      const std::int64_t b = st->workload.workload.microbatch_size;
      if (b > kMaxGlobalBatch / (8 * std::int64_t{st->devices}))
        throw UsageError("--microbatch-size " + std::to_string(b) +
                         " makes the default global "
                         "batch 8 D b larger than " +
                         std::to_string(kMaxGlobalBatch) +
                         " samples (allowed: a smaller --microbatch-size, or --global-batch)");
      space.global_batch = 8 * std::int64_t{st->devices} * b;
    }
    space.microbatch_counts = microbatch_counts(space.devices, space.global_batch);
    if (space.microbatch_counts.empty())
      throw UsageError("--global-batch " + std::to_string(space.global_batch) +
                       " has no divisor N with D=" + std::to_string(space.devices) +
                       " <= N <= " + std::to_string(8 * space.devices) +
                       " (allowed: a global batch with such a divisor, e.g. " +
                       std::to_string(8 * space.devices) + ")");
    // The base spec (what is checked and reported once) at a micro-batch size the search uses:
    // with --global-batch, B / the largest N, not the flag's default 1, which no candidate may
    // use (and a workload may not allow); a measured profile's micro-batch size is then held to
    // each candidate's, not to the base's.
    WorkloadCostFlags base_flags = st->workload;
    const bool batch_varies = st->global_batch_option->count() > 0;
    if (batch_varies)
      base_flags.workload.microbatch_size = space.global_batch / space.microbatch_counts.back();
    const WorkloadCosts base = load_workload(base_flags, budget, "tune", batch_varies);
    // Every candidate would be invalid for the same reason: said once, as bad input.
    check_partition_method(st->workload.partition, static_cast<int>(base.spec.layers.size()));
    std::vector<TuneCandidate> all = enumerate_candidates(space);
    const double tasks = search_tasks(space, all);
    if (tasks > kMaxSearchTasks)
      throw UsageError(
          "tune would take the time of about " + number_text(tasks) +
          " simulated tasks (v-half and v-min's generation counted at its cost) over " +
          std::to_string(all.size()) + " candidates (D=" + std::to_string(space.devices) +
          ", global batch " + std::to_string(space.global_batch) + "), over the bound of " +
          number_text(kMaxSearchTasks) +
          ", about a minute (allowed: fewer --devices or a smaller "
          "--global-batch)");
    // The largest candidate bounds the memory: they are simulated one at a time. Beside it, one
    // micro-batch size's workload (evaluate_candidates): its spec and a cut per stage count (one
    // per v, and 2 D for the V shapes).
    MemoryEstimate largest;
    for (const TuneCandidate& c : all) {
      const MemoryEstimate e = estimate_simulate({.name = c.schedule,
                                                  .devices = space.devices,
                                                  .microbatches = c.microbatches,
                                                  .chunks = c.chunks},
                                                 false);
      if (e.bytes > largest.bytes) largest = e;
    }
    const MemoryEstimate size = estimate_tune_size(
        st->workload.workload.layer_count(), static_cast<double>(space.chunk_counts.size()) + 1);
    largest.bytes += size.bytes;
    largest.detail += " + " + size.detail;
    require_memory(budget, largest, "tune " + st->workload.workload.describe());

    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    // Progress on stderr, naming the candidate about to be costed: a line only once the search
    // has taken more than a second, then at most every half second, except that a candidate
    // expected to take a second or more on its own (a v-half or v-min at large D) is always
    // named before it starts, so a long wait is never silent and its cause is on the screen.
    constexpr double kTasksPerSecond = kMaxSearchTasks / 60;  // the bound is about a minute
    double last_report = -1;
    std::size_t last_width = 0;
    bool reported = false;
    const bool tty = isatty(fileno(stderr)) != 0;
    evaluate_candidates(
        all, base, st->workload, space.devices, [&](std::size_t done, const TuneCandidate& next) {
          const double now = elapsed();
          const bool long_one = candidate_tasks(space.devices, next) / kTasksPerSecond >= 1;
          if (!long_one && (now < 1 || (reported && now - last_report < 0.5))) return;
          std::string what = next.schedule;
          if (next.chunks > 0) what += " v=" + std::to_string(next.chunks);
          what += " N=" + std::to_string(next.microbatches);
          // On a terminal the line rewrites itself, padded over a longer one before it (no
          // escape codes); in a log each report is a line of its own.
          const std::string line = "tune: simulating " + what + " (" + std::to_string(done + 1) +
                                   " of " + std::to_string(all.size()) + ")";
          const int pad =
              tty && last_width > line.size() ? static_cast<int>(last_width - line.size()) : 0;
          std::fprintf(stderr, "%s%s%*s%s", tty ? "\r" : "", line.c_str(), pad, "",
                       tty ? "" : "\n");
          last_width = line.size();
          last_report = now;
          reported = true;
        });
    if (reported && tty) std::fputc('\n', stderr);
    const double seconds = elapsed();
    const auto best = ranked(all);
    // Nothing fits and nothing was merely over the limit: every candidate was refused, so no
    // --memory-limit-bytes would help. Bad input, said once with the first refusal's words.
    if (best.empty() && !all.empty() &&
        std::none_of(all.begin(), all.end(),
                     [](const TuneCandidate& c) { return c.status == TuneStatus::kOverMemory; })) {
      const TuneCandidate& first = all.front();
      std::string why = first.reason;
      if (why.rfind("invalid: ", 0) == 0) why.erase(0, 9);
      throw UsageError("every one of the " + std::to_string(all.size()) +
                       " candidates is invalid, none over memory; the first, " + first.label() +
                       ": " + why);
    }

    if (st->format == "json") {
      nlohmann::json r;
      r["workload"] = {{"name", base.spec.workload},
                       {"config", base.spec.config},
                       {"dtype", std::string(dtype_name(base.spec.dtype))}};
      r["device_profile"] = to_json(base.profile);
      r["devices"] = space.devices;
      r["global_batch"] = space.global_batch;
      r["microbatch_counts"] = space.microbatch_counts;
      r["chunk_counts"] = space.chunk_counts;
      r["memory_limit_bytes"] = base.memory_limit;
      r["order"] = "predicted step time (makespan, s), then the largest rank's peak bytes";
      std::map<const TuneCandidate*, int> rank_of;
      for (std::size_t k = 0; k < best.size(); ++k) rank_of[best[k]] = static_cast<int>(k + 1);
      nlohmann::json cands = nlohmann::json::array();
      // The fitting ones best first, then the rest in the order of the space.
      for (const TuneCandidate* c : best) cands.push_back(candidate_json(*c, rank_of[c]));
      for (const TuneCandidate& c : all)
        if (c.status != TuneStatus::kFits) cands.push_back(candidate_json(c, 0));
      r["best"] = best.empty() ? nlohmann::json() : candidate_json(*best[0], 1);
      r["candidates"] = std::move(cands);
      r["seconds"] = seconds;
      r["provenance"] = provenance();
      std::cout << r.dump(1) << '\n';
    } else {
      print_text(all, best, static_cast<std::size_t>(st->top), space, base,
                 st->workload.workload.describe(), seconds);
    }
  };
}

}  // namespace ppbench::cli
