// `ppbench run`: real pipelined training steps of a workload under a
// schedule, with measured and predicted metrics (harness/backends/cpu).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <limits>
#include <optional>

#include "harness/backends/cpu/cpu_run.h"
#include "harness/backends/run_record.h"
#include "harness/chrome_trace.h"
#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#include "harness/cli/program_beside.h"
#include "harness/device_profile.h"
#include "harness/launch.h"
#include "harness/memory_estimate.h"
#include "harness/output_file.h"
#if PPBENCH_HAVE_CUDA
#include "harness/cuda/cuda_run.h"
#endif
#if PPBENCH_HAVE_MPI
#include "harness/mpi/mpi_run.h"
#endif
#if PPBENCH_HAVE_CUDA_MPI
#include "harness/mpi/cuda_mpi_run.h"
#endif
#include "core/error.h"
#include "harness/report_json.h"
#include "harness/table_unit.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "workloads/partition.h"
#include "workloads/workload_options.h"

namespace ppbench::cli {

namespace {

void print_text(const nlohmann::json& r) {
  const auto& m = r["measured"];
  const auto& p = r["predicted"];
  std::printf("run %s on %s: %s D=%d N=%d b=%d %s, %d step(s) after %d warm-up\n",
              r["schedule"].get<std::string>().c_str(),
              r.value("backend", std::string("cpu")).c_str(),
              r["workload"].get<std::string>().c_str(), r["devices"].get<int>(),
              r["microbatches"].get<int>(), r["microbatch_size"].get<int>(),
              r["dtype"].get<std::string>().c_str(), r["steps"].get<int>(), r["warmup"].get<int>());
  std::printf("loss %.10g  grad_norm %.10g\n", r["loss"].get<double>(),
              r["grad_norm"].get<double>());
  // A reference that one rounding of its start moves past the ceiling cannot tell a rounding
  // from an error in the last step: the first step's comparison decides where the run kept it
  // (first_step), else the run did not fail but was not judged either, and says so.
  const bool judged = !r.contains("check") || r["check"].value("judged", true);
  const bool by_first = r.contains("check") && r["check"].contains("first_step");
  const char* verdict = !r.contains("check") || !r["check"]["passed"].get<bool>() ? "FAILED"
                        : judged                                                  ? "passed"
                        : by_first ? "passed on the first step"
                                   : "NOT JUDGED";
  if (r.contains("check"))
    std::printf("check: %s, largest relative gradient error %s (%s) against %s, tolerance %g\n",
                verdict, r["check"]["max_rel_error"].dump().c_str(),
                r["check"]["worst_tensor"].get<std::string>().c_str(),
                r["check"]["reference"].get<std::string>().c_str(),
                r["check"]["tolerance"].get<double>());
  if (r.contains("check") && r["check"].contains("reference_spread_note"))
    std::printf("  how far rounding moves the reference: %s\n",
                r["check"]["reference_spread_note"].get<std::string>().c_str());
  if (r.contains("check") && r["check"].contains("reference_spread"))
    std::printf(
        "  the single-device step in %s, started one rounding away, lands %g from the "
        "reference, so the gradients were held to %g\n",
        r["check"]["reference_spread"].value("precision", std::string("f64")).c_str(),
        r["check"]["reference_spread"]["gradients"].get<double>(),
        r["check"]["reference_spread"]["gradient_tolerance"].get<double>());
  if (!judged)
    std::printf(
        "  the last step is not judged: %s; %s\n",
        r["check"].value("not_judged", std::string()).c_str(),
        by_first ? "the first step's gradients are compared instead" : "--steps 1 checks one step");
  if (by_first) {
    const auto& f = r["check"]["first_step"];
    std::printf("  first step: %s, largest relative gradient error %s (%s), tolerance %g\n",
                f["passed"].get<bool>() ? "passed" : "FAILED", f["max_rel_error"].dump().c_str(),
                f["worst_tensor"].get<std::string>().c_str(),
                f.contains("reference_spread")
                    ? f["reference_spread"]["gradient_tolerance"].get<double>()
                    : f["tolerance"].get<double>());
  }
  std::printf("step time %.4g ms, %.4g samples/s", r["step_time_s"].get<double>() * 1e3,
              r["throughput"]["samples_per_s"].get<double>());
  if (r["throughput"].contains("tokens_per_s"))
    std::printf(", %.4g tokens/s", r["throughput"]["tokens_per_s"].get<double>());
  std::printf("\n");
  if (r.contains("data_parallel")) {
    const auto& j = r["data_parallel"];
    std::printf(
        "%d processes over MPI on %d node(s): %d pipeline rank(s) x %d replica(s)%s; the job's "
        "last step %.4g ms, bubble %.4f\n",
        j["processes"].get<int>(), j["nodes"].get<int>(), j["pipeline_ranks"].get<int>(),
        j["replicas"].get<int>(), j["overlap"].get<bool>() ? ", all-reduce overlapped" : "",
        j["makespan_s"].get<double>() * 1e3, j["bubble_fraction"].get<double>());
    std::printf("%7s %7s %5s %5s %10s %14s %16s\n", "process", "replica", "rank", "node", "busy ms",
                "all-reduce ms", "exposed ms");
    for (const auto& proc : j["per_process"])
      std::printf("%7d %7d %5d %5d %10.4g %14.4g %16.4g\n", proc["process"].get<int>(),
                  proc["replica"].get<int>(), proc["pipeline_rank"].get<int>(),
                  proc["node"].get<int>(), proc["busy_s"].get<double>() * 1e3,
                  proc["allreduce_s"].get<double>() * 1e3,
                  proc["exposed_allreduce_s"].get<double>() * 1e3);
  }
  std::printf("\n%-18s %10s %10s\n", "", "measured", "predicted");
  for (const char* k : {"bubble_fraction", "bubble_ratio", "zb_bubble_rate"})
    std::printf("%-18s %10.4f %10.4f\n", k, m[k].get<double>(), p[k].get<double>());
  std::printf("(predicted: %s)\n\n", p["note"].get<std::string>().c_str());
  // One binary unit for both activation columns, as `memory` and `model` print theirs.
  double largest = 0;
  for (const auto& mem : r["activation_bytes"])
    largest = std::max(
        {largest, mem["measured_peak_bytes"].get<double>(), mem["model_peak_bytes"].get<double>()});
  const Unit u = byte_unit(largest);
  const std::string peak = std::string("peak act ") + u.name;
  const std::string model = std::string("model act ") + u.name;
  std::printf("rank %12s %12s %14s %14s\n", "busy ms", "idle ms", peak.c_str(), model.c_str());
  for (std::size_t k = 0; k < m["ranks"].size(); ++k) {
    const auto& rk = m["ranks"][k];
    const auto& mem = r["activation_bytes"][k];
    std::printf("%4zu %12.4g %12.4g %14.4g %14.4g\n", k, rk["busy"].get<double>() * 1e3,
                rk["idle"].get<double>() * 1e3, mem["measured_peak_bytes"].get<double>() / u.scale,
                mem["model_peak_bytes"].get<double>() / u.scale);
  }
}

// What `run --backend cpu` will hold, refused before anything is allocated when it cannot fit:
// first the spec's records (from the flags alone), then the schedule, then the run itself from
// the spec, the schedule and the memory model's peaks.
void require_run_memory(const MemoryBudget& budget, const WorkloadFlags& flags,
                        const ScheduleFlags& schedule, const RunOptions& o,
                        const WorkloadSpec* spec) {
  // A file is proven sound here (its message naming the line), before the workload is built.
  const std::string what = "run " + flags.describe() + " " + schedule.describe();
  if (spec == nullptr) {
    require_memory(budget, estimate_spec(flags.layer_count(), false), what);
    if (schedule.file) schedule.build({.channel_capacity = o.executor.channel_capacity});
    return;
  }
  require_memory(budget, estimate_simulate(o.schedule, false), what);
  const Schedule s = schedule.build({.channel_capacity = o.executor.channel_capacity});
  const PartitionPlan plan = partition(*spec, s.placement.stages_per_chain(), o.partition);
  const MemoryEstimate run =
      estimate_cpu_run(*spec, o.schedule, plan, predicted_peak_bytes(s, plan, o.recompute),
                       {.recompute = o.recompute,
                        .check = o.check,
                        .channel_capacity = o.executor.channel_capacity,
                        .optimizer = o.optimizer.kind,
                        .copies = s.placement.copies_per_part()});
  require_memory(budget, run, what + (o.check ? " --check" : ""));
  // A rank thread per rank, and with --check the main thread's own GEMMs (the reference step).
  require_address_space(budget, run, s.placement.ranks + (o.check ? 1 : 0),
                        what + (o.check ? " --check" : ""));
}

}  // namespace

// The placement and link flags of --backend cuda, as typed (checked by run_cuda).
struct CudaFlags {
  std::optional<std::string> gpus;
  std::optional<int> virtual_devices;
  std::optional<int> sms_per_device;
  std::optional<double> link_bandwidth, link_latency;
  bool graph = false;
};

Command add_run(CLI::App& parent) {
  auto* app = parent.add_subcommand("run",
                                    "Run real pipelined training steps of a workload under a "
                                    "schedule (CPU threads, or CUDA with --backend cuda)");
  struct State {
    std::string backend = "cpu";
    WorkloadFlags workload;
    ScheduleFlags schedule;
    RunOptions options;
    CudaFlags cuda;
    int dp = kDefaultReplicas;
    bool dp_overlap = false;
    std::string optimizer;  // "": adamw
    std::string pin_ranks = "on";
    CLI::Option* pin_option = nullptr;
    std::string format = "text";
    std::string trace_out, results, profile_out, profile_statistic = "median";
    CLI::Option* trace_option = nullptr;
    CLI::Option* profile_option = nullptr;
    CLI::Option* results_option = nullptr;
    ChannelCapacityFlag channel_capacity;
    MemoryFlag memory;
  };
  auto st = std::make_shared<State>();
  app->add_option("--backend", st->backend,
                  "cpu (threads, Eigen) or cuda (GPUs, see --gpus / --virtual-devices)")
      ->check(one_of({"cpu", "cuda"}));
  st->workload.add_to(*app, "f32");
  st->schedule.add_to(*app);
  app->add_option("--partition", st->options.partition,
                  "balanced (minimise the largest stage's F+I+W FLOPs), uniform, or layer counts "
                  "per stage such as 4,4,3,5");
  app->add_option("--steps", st->options.steps, "Measured training steps (default 1)")
      ->transform(integer_in(1, 1000000));
  app->add_option("--warmup", st->options.warmup, "Unmeasured steps first (default 0)")
      ->transform(integer_in(0, 1000000));
  app->add_option("--seed", st->options.seed,
                  "Seed of parameters and data, a decimal integer from 0 to 2^64-1 (default 1234)")
      ->transform(unsigned64());
  app->add_flag("--recompute", st->options.recompute,
                "GPipe's re-materialisation: keep only stage inputs, recompute the forward before "
                "the backward");
  app->add_option("--watchdog", st->options.executor.watchdog_seconds,
                  "Seconds with no rank making progress (every rank waiting on a transfer) "
                  "before the step fails; across processes and on GPUs, seconds one wait may "
                  "take (default 60; 0.05 <= seconds <= 1e6: a rank woken late, by a nap's "
                  "overshoot or a stolen time slice, must not read as a stall)")
      ->transform(number_in(0.05, 1e6));
  st->channel_capacity.add_to(*app, "; cpu, also across processes");
  st->pin_option =
      app->add_option(
             "--pin-ranks", st->pin_ranks,
             "cpu: on pins rank r's thread to the r-th CPU the process may use where every "
             "rank has one of its own (steadier steps); off leaves them to the OS (default "
             "on; docs/metrics.md)")
          ->check(one_of({"on", "off"}));
  app->add_option("--gpus", st->cuda.gpus, "cuda: one rank per listed GPU, e.g. 0,1,2,3 (NCCL)");
  app->add_option("--virtual-devices", st->cuda.virtual_devices,
                  "cuda: split one GPU into D green-context partitions, one rank each")
      ->transform(integer_in(1, 1024));
  app->add_option("--sms-per-device", st->cuda.sms_per_device,
                  "cuda --virtual-devices: give every partition exactly K SMs (a multiple of the "
                  "GPU's partition granularity, 8 on Hopper), so that each added device adds "
                  "compute; default: the GPU's SMs shared out")
      ->transform(integer_in(1, 1024));
  // Checked here as well as by the link model, so that a bad value is refused on any machine,
  // before the GPU is looked for.
  app->add_option("--link-bandwidth", st->cuda.link_bandwidth,
                  "cuda --virtual-devices: emulated link bandwidth between partitions, GB/s")
      ->transform(number_in(0, 1e12, true));
  app->add_option("--link-latency", st->cuda.link_latency,
                  "cuda --virtual-devices: emulated link latency, microseconds")
      ->transform(number_in(0, 1e12));
  app->add_flag(
      "--cuda-graph", st->cuda.graph,
      "cuda --gpus: capture each rank's step once as a CUDA graph and launch it for every "
      "measured step (docs/cuda-graphs.md)");
  app->add_option("--dp", st->dp,
                  "Data-parallel replicas R of the pipeline, each on its own processes: launch "
                  "with mpirun -np P, P = --pp x --dp (" +
                      replicas_help() + "; docs/multi-process.md)")
      ->transform(integer_in(1, kMaxReplicas));
  app->add_flag("--dp-overlap", st->dp_overlap,
                "With --dp R, R >= 2: all-reduce each stage's gradients as soon as its last "
                "backward ends (default: once, after the rank's last action)");
  app->add_option("--optimizer", st->optimizer,
                  "The optimizer step after each stage's last backward: none, sgd or adamw "
                  "(default adamw; cuda: not with --cuda-graph for Chimera or DualPipe)")
      ->check(one_of({"none", "sgd", "adamw"}));
  app->add_option("--lr", st->options.optimizer.lr, "Learning rate (default 1e-3)")
      ->transform(number_in(1e-12, 1e3));
  app->add_option("--weight-decay", st->options.optimizer.weight_decay,
                  "adamw's decoupled weight decay (default 0.01)")
      ->transform(number_in(0, 1));
  app->add_flag("--check", st->options.check,
                "Also compute the step on one device (cpu: the same step in the run's own "
                "precision; cuda: the run's first GPU, whole, same dtype) and record the largest "
                "relative gradient error per tensor "
                "in \"check\"; exit 1 past the tolerance");
  app->add_option("--check-tolerance", st->options.check_tolerance,
                  "Largest relative error --check accepts (default by dtype: f64 1e-10, f32 1e-4, "
                  "bf16 2e-2)")
      ->transform(number_in(0, 1.0, true));
  app->add_flag("--progress", st->options.progress, "One line per step on stderr");
  app->add_option("--format", st->format, "text or json (the full record)")
      ->check(one_of({"text", "json"}));
  st->trace_option = app->add_option(
      "--trace-out", st->trace_out,
      "Write the last step's timeline as a Chrome/Perfetto trace: a file (replaced atomically), "
      "a device, a FIFO, or - for stdout (then instead of the report)");
  st->results_option = app->add_option(
      "--results", st->results,
      "Append the JSON record as one line to this JSON Lines file, under an exclusive lock (safe "
      "for concurrent runs), or to a device, a FIFO, or - for stdout (then instead of the report)");
  st->profile_option = app->add_option(
      "--profile-out", st->profile_out,
      "Write the last measured step's per-stage F, I, W, B, FB and hand-over times (each op's "
      "median over the step, or --profile-statistic) as a device profile (JSON, replaced "
      "atomically) that simulate --device-profile reads");
  app->add_option("--profile-statistic", st->profile_statistic,
                  "How --profile-out sums up each op's times over the step: median (the "
                  "default: what a typical action took) or mean (what the step spent, as the "
                  "replay charges it; closer where action times are skewed, e.g. ranks sharing "
                  "cores)")
      ->check(one_of({"median", "mean"}))
      ->needs(st->profile_option);
  st->memory.add_to(*app);
  app->footer(
      "Example: ppbench run --workload transformer --preset tiny-llama --schedule 1f1b --devices 2 "
      "--microbatches 8 --steps 3 --warmup 1\n"
      "         ppbench run --workload mlp --layers 4 --schedule-file my_schedule.txt");
  return [st] {
    const bool cuda_flags = st->cuda.gpus || st->cuda.virtual_devices || st->cuda.sms_per_device ||
                            st->cuda.link_bandwidth || st->cuda.link_latency || st->cuda.graph;
    if (st->backend != "cuda" && cuda_flags)
      throw UsageError(
          "--gpus, --virtual-devices, --sms-per-device, --link-bandwidth, --link-latency and "
          "--cuda-graph need --backend cuda");
    require_replicas_to_overlap(st->dp, st->dp_overlap);  // then --dp-overlap has R >= 2
    // Several processes started by mpirun (or srun): one pipeline rank each.
    const LaunchEnvironment launch = launch_environment();
    const bool multi_process = launch.by_mpi && launch.size != 1;
    if (launch.launcher == "Slurm")
      throw UsageError("srun started " + std::to_string(launch.size) +
                       " tasks without PMIx or PMI, so each would run the whole job on its own: "
                       "start it with srun --mpi=pmix -n P ppbench run ... (P = --pp x --dp)");
#if !PPBENCH_HAVE_CUDA_MPI
    // Before anything is checked or written: the program linked with what the run needs starts
    // over from the command line (ppbench-cuda, or ppbench-cuda-mpi across processes).
    if (st->backend == "cuda" && multi_process)
      exec_program_beside(
          cuda_mpi_program_name(),
          "--backend cuda started by " + launch.launcher + " as one of several processes",
          "CUDA, MPI and nccl.h together (ppbench-cuda-mpi is built where CMake "
          "finds all three)");
#endif
#if !PPBENCH_HAVE_CUDA
    if (st->backend == "cuda")
      exec_program_beside(cuda_program_name(), "--backend cuda", "CUDA (no nvcc found)");
#endif
    // Refuse an unwritable output before spending the run on it (nothing is created or
    // truncated here), then a size that cannot fit. Across processes only process 0 writes, so
    // only it looks at the paths (another node need not have their folder); every process still
    // knows which ask for stdout, for the refusals below that all of them must make alike.
    const bool writer = !multi_process || launch.rank <= 0;  // -1: the launcher does not say
    const auto output = [&](const CLI::Option* given, const char* flag, const std::string& path,
                            OutputMode mode) {
      OutputTarget t;
      if (given->count() == 0) return t;
      if (writer) return check_output(flag, path, mode);
      if (path == "-") t.kind = OutputTarget::Kind::kStdout;
      return t;
    };
    const OutputTarget trace_out =
        output(st->trace_option, "--trace-out", st->trace_out, OutputMode::kReplace);
    const OutputTarget results =
        output(st->results_option, "--results", st->results, OutputMode::kAppend);
    const OutputTarget profile_out =
        output(st->profile_option, "--profile-out", st->profile_out, OutputMode::kReplace);
    if (trace_out.is_stdout() && results.is_stdout())
      throw UsageError(
          "--trace-out - and --results - both ask for stdout: give one of them a file");
    if (profile_out.is_stdout() && (trace_out.is_stdout() || results.is_stdout()))
      throw UsageError(
          "--profile-out - and --trace-out - or --results - all ask for stdout: give one of them "
          "a file");
    require_distinct_files({&results, &trace_out, &profile_out},
                           {{"--schedule-file", st->schedule.schedule_file}});
    if (st->pin_option->count() > 0 && (st->backend != "cpu" || multi_process))
      throw UsageError("--pin-ranks places the rank threads of one CPU process; " +
                       std::string(multi_process
                                       ? "across processes, mpirun's --bind-to places them"
                                       : "--backend cuda runs its ranks on GPUs"));
    st->options.executor.pin_ranks = st->pin_ranks == "on";
    st->options.optimizer.kind = parse_optimizer(st->optimizer.empty() ? "adamw" : st->optimizer);
    if (st->dp > 1 && !multi_process)
      throw UsageError("--dp " + std::to_string(st->dp) + (st->dp_overlap ? " --dp-overlap" : "") +
                       " runs each replica's ranks as separate processes: start it with mpirun -np "
                       "P ppbench run ... or srun --mpi=pmix -n P ppbench run ... (P = --pp x "
                       "--dp)");
    if (multi_process) {
#if !PPBENCH_HAVE_MPI
      // Before anything is checked or written: ppbench-mpi starts over from the command line.
      exec_program_beside(mpi_program_name(),
                          launch.launcher + " started this ppbench as one of several processes",
                          "MPI (install libopenmpi-dev and rebuild)");
#endif
    }
    const MemoryBudget budget = st->memory.budget();
    st->options.schedule = st->schedule.resolve(budget);
    if (st->schedule.file)
      st->options.file_schedule = std::make_shared<const Schedule>(st->schedule.file->schedule);
    if (st->backend == "cpu") {
      // The schedule is built to find the capacity it needs: bounded first.
      if (!st->channel_capacity.given)
        require_memory(budget, estimate_simulate(st->options.schedule, false),
                       "run " + st->schedule.describe());
      st->options.executor.channel_capacity = st->channel_capacity.resolve(st->schedule);
    }
    require_run_memory(budget, st->workload, st->schedule, st->options, nullptr);
    const WorkloadSpec spec = st->workload.build();
    if (st->backend == "cpu") {
      require_cpu_workload(spec);  // cheap, and a clearer refusal than the memory estimate's
      require_run_memory(budget, st->workload, st->schedule, st->options, &spec);
    }
    RunOutput out;
#if PPBENCH_HAVE_CUDA  // without CUDA, ppbench-cuda has taken over above
    CudaRunOptions cuda_options;
    cuda_options.run = st->options;
    cuda_options.gpus = st->cuda.gpus;
    cuda_options.virtual_devices = st->cuda.virtual_devices;
    cuda_options.partition_sms = st->cuda.sms_per_device.value_or(0);
    cuda_options.link_bandwidth_gb_per_s = st->cuda.link_bandwidth;
    cuda_options.link_latency_us = st->cuda.link_latency;
    cuda_options.cuda_graph = st->cuda.graph;
    // Measured on the CPU (harness/backends/cpu/reference_step.h: in f32 for an f32 run, else
    // float64), within half of the memory --max-memory or the machine leaves: the CUDA backend
    // does not link the CPU's.
    const double spread_budget =
        budget.bytes > 0 ? budget.bytes / 2 : std::numeric_limits<double>::infinity();
    cuda_options.reference_spread = [&](const WorkloadSpec& w, int n, int steps, std::string* why) {
      return cpu_reference_spread(w, n, st->options.seed, steps, st->options.optimizer,
                                  spread_budget, why);
    };
#endif
    if (multi_process && st->backend == "cuda") {
#if PPBENCH_HAVE_CUDA_MPI  // elsewhere ppbench-cuda-mpi has taken over above
      out = run_cuda_mpi(spec, cuda_options, {st->dp, st->dp_overlap});
#endif
    } else if (multi_process) {
#if PPBENCH_HAVE_MPI
      out = run_cpu_mpi(spec, st->options, {st->dp, st->dp_overlap});
#endif
    } else if (st->backend == "cuda") {
#if PPBENCH_HAVE_CUDA
      out = run_cuda(spec, cuda_options);
#endif
    } else {
      out = run_cpu(spec, st->options);
    }
    if (!out.report) return;  // another process of the job reports
    // The report first, so that a failed write below loses nothing that was measured.
    if (!trace_out.is_stdout() && !results.is_stdout() && !profile_out.is_stdout()) {
      if (st->format == "json")
        std::cout << out.record.dump(1) << '\n';
      else
        print_text(out.record);
    }
    // The record first, then the trace; a failure of one does not keep the other from its file.
    std::exception_ptr failed;
    auto attempt = [&failed](const auto& write) {
      try {
        write();
      } catch (...) {
        if (!failed) failed = std::current_exception();
      }
    };
    attempt([&] {
      if (results.given()) append_line(results, out.record.dump());
    });
    attempt([&] {
      if (trace_out.given())
        write_output(trace_out, to_chrome_trace(out.trace, trace_facts(out.record)).dump() + "\n");
    });
    attempt([&] {
      if (!profile_out.given()) return;
      // The stages the run measured: the schedule's placement, the workload's partition.
      const Schedule s =
          st->schedule.build({.channel_capacity = st->options.executor.channel_capacity});
      const PartitionPlan plan =
          partition(spec, s.placement.stages_per_chain(), st->options.partition);
      nlohmann::json identity = out.record;
      identity["name"] = "measured by run --backend " + st->backend + " --schedule " +
                         out.record["schedule"].get<std::string>();
      write_output(profile_out, measured_profile_json(out.trace, s.placement, plan, identity,
                                                      profile_statistic(st->profile_statistic))
                                        .dump(1) +
                                    "\n");
    });
    if (failed) std::rethrow_exception(failed);
    if (const std::string why = check_failure(out.record); !why.empty()) throw CheckFailed(why);
  };
}

}  // namespace ppbench::cli
