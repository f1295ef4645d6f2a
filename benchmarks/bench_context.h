// What every ppbench benchmark records beside Google Benchmark's own context:
// Google Benchmark has no CPU model, commit or load, and figures from other
// machines, commits or a busy machine are not comparable (compare_perf.py
// prints and checks them).
#pragma once

#include <cstdio>
#include <string>

#include <benchmark/benchmark.h>

#include "harness/provenance.h"

namespace ppbench {

inline void add_benchmark_context() {
  const nlohmann::json p = provenance();
  benchmark::AddCustomContext("cpu_model", p["cpu"].get<std::string>());
  benchmark::AddCustomContext("git_commit", p["git_commit"].get<std::string>());
  benchmark::AddCustomContext("compiler", p["compiler"].get<std::string>());
  // provenance() reads the load average (empty where getloadavg fails); here it is one string,
  // as Google Benchmark's custom context wants.
  if (const nlohmann::json& load = p["load_average"]; load.size() == 3) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", load[0].get<double>(), load[1].get<double>(),
                  load[2].get<double>());
    benchmark::AddCustomContext("load_average", buf);
  }
#ifdef NDEBUG
  benchmark::AddCustomContext("ppbench_build_type", "release");
#else
  benchmark::AddCustomContext("ppbench_build_type", "debug (assertions on: not comparable)");
#endif
}

// stdout flushed at every line, where a file would hold it until the program ends: a benchmark
// stopped at a time limit (gpu-check's pieces) leaves every row that finished in its log, the
// JSON of --benchmark_format=json included, as far as it got.
inline void line_buffered_output() { std::setvbuf(stdout, nullptr, _IOLBF, 0); }

}  // namespace ppbench
