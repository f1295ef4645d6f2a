// `ppbench run`: real pipelined training steps of a workload under a
// schedule, with measured and predicted metrics (harness/backends/cpu).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "harness/atomic_file.h"
#include "harness/backends/cpu/cpu_run.h"
#include "harness/chrome_trace.h"
#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#if PPBENCH_HAVE_CUDA
#include "harness/gpu/cuda_run.h"
#endif
#include "harness/report_json.h"
#include "schedules/error.h"
#include "workloads/workload_options.h"

namespace ppbench::cli {

namespace {

void print_text(const nlohmann::json& r) {
  const auto& m = r["measured"];
  const auto& p = r["predicted"];
  std::printf("run %s on %s: %s D=%d N=%d b=%d %s, %d step(s) after %d warm-up\n",
              r["schedule"].get<std::string>().c_str(),
              r.value("backend", std::string("cpu")).c_str(),
              r["workload"].get<std::string>().c_str(),
              r["devices"].get<int>(), r["microbatches"].get<int>(), r["microbatch_size"].get<int>(),
              r["dtype"].get<std::string>().c_str(), r["steps"].get<int>(), r["warmup"].get<int>());
  std::printf("loss %.10g  grad_norm %.10g\n", r["loss"].get<double>(), r["grad_norm"].get<double>());
  if (r.contains("check"))
    std::printf("check: %s, largest relative gradient error %s (%s) against %s, tolerance %g\n",
                r["check"]["passed"].get<bool>() ? "passed" : "FAILED",
                r["check"]["max_rel_error"].dump().c_str(),
                r["check"]["worst_tensor"].get<std::string>().c_str(),
                r["check"]["reference"].get<std::string>().c_str(),
                r["check"]["tolerance"].get<double>());
  std::printf("step time %.4g ms, %.4g samples/s", r["step_time_s"].get<double>() * 1e3,
              r["throughput"]["samples_per_s"].get<double>());
  if (r["throughput"].contains("tokens_per_s"))
    std::printf(", %.4g tokens/s", r["throughput"]["tokens_per_s"].get<double>());
  std::printf("\n\n%-18s %10s %10s\n", "", "measured", "predicted");
  for (const char* k : {"bubble_fraction", "bubble_ratio", "zb_bubble_rate"})
    std::printf("%-18s %10.4f %10.4f\n", k, m[k].get<double>(), p[k].get<double>());
  std::printf("(predicted: the simulator replaying this step's measured per-op costs)\n\n");
  std::printf("rank %12s %12s %14s %14s\n", "busy ms", "idle ms", "peak act MB", "model act MB");
  for (std::size_t k = 0; k < m["ranks"].size(); ++k) {
    const auto& rk = m["ranks"][k];
    const auto& mem = r["activation_bytes"][k];
    std::printf("%4zu %12.4g %12.4g %14.4g %14.4g\n", k, rk["busy"].get<double>() * 1e3,
                rk["idle"].get<double>() * 1e3, mem["measured_peak_bytes"].get<double>() / 1e6,
                mem["model_peak_bytes"].get<double>() / 1e6);
  }
}

// Appends one JSON line to a JSON Lines file, atomically: the old lines and
// the new one are written to a temp file that replaces the original.
void append_record(const std::string& path, const nlohmann::json& record) {
  std::string content;
  if (std::ifstream in{path}) {
    std::ostringstream all;
    all << in.rdbuf();
    content = all.str();
    if (!content.empty() && content.back() != '\n') content += '\n';
  }
  content += record.dump() + "\n";
  write_file_atomically(path, content);
}

}  // namespace

// The placement and link flags of --backend cuda, as typed (checked by run_cuda).
struct CudaFlags {
  std::optional<std::string> gpus;
  std::optional<int> virtual_devices;
  std::optional<double> link_bandwidth, link_latency;
  bool graph = false;
};

Command add_run(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "run", "Run real pipelined training steps of a workload under a schedule (CPU threads)");
  struct State {
    std::string backend = "cpu";
    WorkloadFlags workload;
    ScheduleFlags schedule;
    RunOptions options;
    CudaFlags cuda;
    std::string format = "text";
    std::string trace_out, results;
  };
  auto st = std::make_shared<State>();
  app->add_option("--backend", st->backend, "cpu (threads, Eigen) or cuda (GPUs, see --gpus / --virtual-devices)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  st->workload.add_to(*app, "f32");
  st->schedule.add_to(*app);
  app->add_option("--partition", st->options.partition,
                  "balanced (minimise the largest stage's F+I+W FLOPs), uniform, or layer counts "
                  "per stage such as 4,4,3,5");
  app->add_option("--steps", st->options.steps, "Measured training steps (default 1)")->check(CLI::Range(1, 1000000));
  app->add_option("--warmup", st->options.warmup, "Unmeasured steps first (default 0)")->check(CLI::Range(0, 1000000));
  app->add_option("--seed", st->options.seed, "Seed of parameters and data (default 1234)");
  app->add_flag("--recompute", st->options.recompute,
                "GPipe's re-materialisation: keep only stage inputs, recompute the forward before the backward");
  app->add_option("--watchdog", st->options.executor.watchdog_seconds,
                  "Seconds a rank may wait on a transfer before the step fails (default 60)")
      ->check(CLI::PositiveNumber);
  app->add_option("--channel-capacity", st->options.executor.channel_capacity,
                  "Messages one rank-to-rank mailbox holds (default 4)")
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--gpus", st->cuda.gpus, "cuda: one rank per listed GPU, e.g. 0,1,2,3 (NCCL)");
  app->add_option("--virtual-devices", st->cuda.virtual_devices,
                  "cuda: split one GPU into D green-context partitions, one rank each")
      ->check(CLI::Range(1, 1024));
  app->add_option("--link-bandwidth", st->cuda.link_bandwidth,
                  "cuda --virtual-devices: emulated link bandwidth between partitions, GB/s");
  app->add_option("--link-latency", st->cuda.link_latency,
                  "cuda --virtual-devices: emulated link latency, microseconds");
  app->add_flag("--cuda-graph", st->cuda.graph,
                "cuda --gpus: capture each rank's step once as a CUDA graph and launch it for every "
                "measured step (docs/cuda-graphs.md)");
  app->add_flag("--check", st->options.check,
                "Also compute the step on one device (cpu: float64; cuda: the run's first GPU, "
                "whole, same dtype) and record the largest relative gradient error per tensor "
                "in \"check\"; exit 1 past the tolerance");
  app->add_option("--check-tolerance", st->options.check_tolerance,
                  "Largest relative error --check accepts (default by dtype: f64 1e-10, f32 1e-4, "
                  "bf16 2e-2)")
      ->check(CLI::Range(1e-300, 1.0));
  app->add_flag("--progress", st->options.progress, "One line per step on stderr");
  app->add_option("--format", st->format, "text or json (the full record)")->check(CLI::IsMember({"text", "json"}));
  app->add_option("--trace-out", st->trace_out, "Write the last step's timeline as a Chrome/Perfetto trace");
  app->add_option("--results", st->results, "Append the JSON record to this JSON Lines file (atomically)");
  app->footer(
      "Example: ppbench run --workload transformer --preset tiny-llama --schedule 1f1b --devices 2 "
      "--microbatches 8 --steps 3 --warmup 1");
  return [st] {
    const bool cuda_flags = st->cuda.gpus || st->cuda.virtual_devices || st->cuda.link_bandwidth ||
                            st->cuda.link_latency || st->cuda.graph;
    if (st->backend != "cuda" && cuda_flags)
      throw UsageError("--gpus, --virtual-devices, --link-bandwidth, --link-latency and --cuda-graph "
                       "need --backend cuda");
#if !PPBENCH_HAVE_CUDA
    if (st->backend == "cuda")
      throw EnvironmentError("--backend cuda: this ppbench was built without CUDA (no nvcc found)");
#endif
    const WorkloadSpec spec = st->workload.build();
    // Refuse an unwritable output before spending the run on it.
    for (const std::string& path : {st->results, st->trace_out}) {
      const auto dir = std::filesystem::path(path).parent_path();
      if (!path.empty() && !dir.empty() && !std::filesystem::is_directory(dir))
        throw UsageError("cannot write '" + path + "': directory '" + dir.string() + "' does not exist");
    }
    st->options.schedule = st->schedule.params();
    RunOutput out;
#if PPBENCH_HAVE_CUDA
    if (st->backend == "cuda") {
      CudaRunOptions o;
      o.run = st->options;
      o.gpus = st->cuda.gpus;
      o.virtual_devices = st->cuda.virtual_devices;
      o.link_bandwidth_gb_per_s = st->cuda.link_bandwidth;
      o.link_latency_us = st->cuda.link_latency;
      o.cuda_graph = st->cuda.graph;
      out = run_cuda(spec, o);
    } else {
      out = run_cpu(spec, st->options);
    }
#else
    out = run_cpu(spec, st->options);
#endif
    if (!st->trace_out.empty())
      write_file_atomically(st->trace_out, to_chrome_trace(out.trace, out.record["provenance"]).dump() + "\n");
    if (!st->results.empty()) append_record(st->results, out.record);
    if (st->format == "json") std::cout << out.record.dump(1) << '\n';
    else print_text(out.record);
    if (const std::string why = check_failure(out.record); !why.empty()) throw CheckFailed(why);
  };
}

}  // namespace ppbench::cli
