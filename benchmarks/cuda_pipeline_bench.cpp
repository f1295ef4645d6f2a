// The GPU pipeline's performance goals on one GPU split into virtual devices (green-context
// partitions of equal SM counts, device-to-device copies between them), recorded by
// scripts/gpu-check.sh. Without a visible GPU the program says so and exits 0.
//
// The model: Llama-3-8B's layer shape (hidden 4096, 32 query / 8 key-value heads, SwiGLU 14336,
// its 128256-token embedding and LM head), sequence 512, micro-batch 1, bf16. At sequence 512
// the LM head costs about 2.3 layers of FLOPs, so a pipeline of D stages gets 3(D-1) layers:
// three on every stage (the embedding joins the first), the head on a stage of its own; the
// mean stage then costs 89 % (D = 2), 95 % (D = 4) and 97 % (D = 8) of the largest. More layers
// or sequence 1024 do not fit D = 8 in 80 GB: parameters with their f32 gradients are 34 GB
// there, and the 1F1B warm-up keeps D micro-batches of a stage on rank 0.
//
// BM_Scaling/1f1b/D<D>/N32 (D = 2, 4, 8, as far as the GPU's SMs allow): 1F1B at N = 32 on D
// partitions of k SMs, then the same model as ONE pipeline stage (D = 1) on one partition of the
// same k SMs. Counters:
//   scaling_efficiency = rate(D) / (D x rate(one partition) x (1 - theory_bubble)), rates in
//       samples/s; goal >= 0.9 (goal_met). theory_bubble is the simulator's bubble_fraction for
//       this schedule with each stage costing its F, I and W FLOPs (the partition's imbalance
//       included, communication free); with that bubble the denominator is exactly the
//       pipeline's ideal throughput, so what the figure measures is the partitions sharing one
//       GPU (memory bandwidth, L2), the transfers and the executor, not the partitioner.
//   scaling_efficiency_uniform: the same against the closed form (D-1)/(N+D-1) of equal stages.
//   The shortfall has two parts, each a counter: the bubble (measured_bubble against
//   theory_bubble), and compute_slowdown = D x rate(one partition) x (1 - measured_bubble) /
//   rate(D), how much longer the same work took on a partition while the others ran beside it
//   than on that partition alone (shared L2, memory bandwidth and power: 1 if partitions were
//   isolated machines). efficiency = (1 - measured_bubble) / ((1 - theory_bubble) x slowdown).
//   The one-partition run's own gaps between actions count as its compute here (so that the
//   identity holds); its measured bubble is in its kept record.
//   pipeline_efficiency = (1 - measured_bubble) / (1 - theory_bubble), the schedule's and the
//   executor's share alone, and replayed_bubble, the simulator's replay of the step with its own
//   measured per-op costs: a measured bubble close to the replay is the costs' doing (a stage
//   slowed more than its FLOPs say), one far above it the executor's.
//   samples_per_s, samples_per_s_one_partition, theory_bubble, closed_form_bubble,
//   measured_bubble, sms_per_partition, partitions_as_requested (the driver granted k SMs each),
//   kept (1: both runs' files were written where PPBENCH_BENCH_KEEP_DIR says, or it is unset).
//
// BM_Fidelity/<schedule>/D4/N8 (every family; interleaved-1f1b with v = 2): the bubble_fraction
// measured on the GPU beside the simulator replaying the same step's measured per-op costs
// (ppbench's run record holds both, as for benchmarks/bubble_fidelity on CPU threads). Counters
// measured_bubble, predicted_bubble, gap_pp (measured - predicted, percentage points; goal
// within 3), within_3pp, kept.
//
// Where PPBENCH_BENCH_KEEP_DIR names a folder (gpu-check sets it), every run of BM_Scaling and
// BM_Fidelity keeps its record, trace and measured profile (per-op means, as the replay takes
// them) there, as <scaling|scaling-one-partition-of-D<D>|fidelity>-<schedule>-D<D>-N<N>
// .record.json, .trace.json and .profile.json. A figure can then be taken apart on any machine:
// a bubble gap, the trace against the replay's own timeline (`ppbench simulate --device-profile
// <profile> --trace-out` of the same step and workload); the compute slowdown, each op's time in
// the pipelined run against the same op on one partition alone.
//
// BM_Overhead/<schedule>/D<D>/N<N> (D = 2, 4, 8 x N = 8, 32, 128 where the family accepts the
// size): the GPU executor's own cost per action, with passes that do nothing (F and B hand a
// 128-byte tensor on, W returns): the host threads' event records, NVTX ranges, the copy
// transport's device-to-device copies and host hand-over, the trace. Counters:
//   us_per_rank_action = wall per step x D / actions: how much every action lengthens its rank's
//       timeline (goal < 10 us; under_10us); it includes starting and joining the D host threads
//       of a step, which is why N = 128 is the fairer row, and reading back each action's timing
//       events into the trace;
//   gpu_us_per_rank_action: the same from the GPU timeline (first to last event of the step),
//       without the host threads' start-up and the final synchronisation;
//   us_per_action = wall / actions; compute_us, handoff_us: mean compute and transfer event on
//       the GPU timeline; actions (DualPipe's overlapped pairs count once); per_action_timing (0:
//       the driver refused a graph's timing events, and the GPU-timeline counters are empty).
// At D = 1 the rank has the whole GPU (no partition), so that its row stands beside
// BM_OverheadGraph/<schedule>/D1/N<N>: the same step captured once as a CUDA graph
// (--cuda-graph, docs/cuda-graphs.md) and launched again each iteration, where the executor's
// cost is the graph's launch and its timing-event nodes: graph_us_per_rank_action, from the
// graphs' launch to their completion, with no host walk and no read-back (goal < 3 us;
// under_3us); its us_per_rank_action holds the read-back too. --cuda-graph
// runs one rank per GPU (--gpus), so on a GPU lent alone D = 1 is where it can be measured.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include "bench_context.h"
#include "core/error.h"
#include "harness/backends/run_record.h"
#include "harness/chrome_trace.h"
#include "harness/cuda/cuda_executor.h"
#include "harness/cuda/cuda_run.h"
#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_placement.h"
#include "harness/cuda/transport_factory.h"
#include "harness/device_profile.h"
#include "harness/metrics.h"
#include "harness/output_file.h"
#include "harness/simulator.h"
#include "schedules/registry.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/device_info.h"
#include "workloads/partition.h"
#include "workloads/transformer.h"

namespace {

using namespace ppbench;
using WallClock = std::chrono::steady_clock;

constexpr std::int64_t kSeq = 512;
constexpr int kLayersPerStage = 3;
constexpr double kGoalEfficiency = 0.9;

WorkloadSpec llama_shaped(int layers) {
  TransformerConfig c = transformer_preset("llama3-8b");
  c.layers = layers;
  c.seq = kSeq;
  return build_transformer(c, 1, DType::kBF16);
}

// --- (a) scaling ------------------------------------------------------------------------------

// The simulator's bubble for a one-stage-per-rank schedule whose stages cost their FLOPs.
double theory_bubble(const WorkloadSpec& spec, const ScheduleParams& params) {
  const Schedule s = generate(params);
  const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), "balanced");
  std::vector<StageCost> costs;
  for (const StageSpec& st : plan.stages) {
    StageCost c;
    c.f = st.flops.f * 1e-12;  // TFLOP: any unit will do, only ratios matter
    c.i = st.flops.i * 1e-12;
    c.w = st.flops.w * 1e-12;
    c.b = c.i + c.w;
    c.fb = c.f + c.b;
    costs.push_back(c);
  }
  const Trace t = simulate(s, CostModel(costs), {.record_comm = false});
  return compute_metrics(t, s.placement).bubble_fraction;
}

// Each rank's activation arena: the 1F1B warm-up keeps up to min(D, N) micro-batches of the
// largest stage (rank 0 the most), plus the passes' temporaries. Explicit, because run_cuda's
// default share of free memory sizes every rank by its own parameters, and rank 0 (the
// embedding) has the most.
std::size_t arena_bytes(const WorkloadSpec& spec, int devices, int microbatches) {
  const PartitionPlan plan = partition(spec, devices, "balanced");
  std::int64_t largest = 0;
  for (const StageSpec& st : plan.stages) largest = std::max(largest, st.activation.b);
  const auto kept =
      static_cast<double>(std::min(devices, microbatches)) * static_cast<double>(largest);
  return static_cast<std::size_t>(kept * 1.25) + (std::size_t{1} << 30);
}

// Keeps a run's record, trace and measured profile as <what>-<schedule>-D<D>-N<N>.*.json where
// PPBENCH_BENCH_KEEP_DIR says (nothing when it is unset or empty). The runs here use run_cuda's
// default partition, so the profile's stages are that partition's.
void write_kept_run(const std::string& what, const ScheduleParams& params, const WorkloadSpec& spec,
                    const RunOutput& out) {
  const char* dir = std::getenv("PPBENCH_BENCH_KEEP_DIR");
  if (dir == nullptr || *dir == '\0') return;
  const std::string base = std::string(dir) + "/" + what + "-" + params.name + "-D" +
                           std::to_string(params.devices) + "-N" +
                           std::to_string(params.microbatches);
  const auto keep = [](const std::string& path, const std::string& text) {
    write_output(check_output("PPBENCH_BENCH_KEEP_DIR", path, OutputMode::kReplace), text + "\n");
  };
  keep(base + ".record.json", out.record.dump(1));
  keep(base + ".trace.json", to_chrome_trace(out.trace, trace_facts(out.record)).dump());
  const Schedule s = generate(params);
  const PartitionPlan plan =
      partition(spec, s.placement.stages_per_chain(), CudaRunOptions{}.run.partition);
  nlohmann::json identity = out.record;
  identity["name"] = "measured by cuda_pipeline_bench (" + what + "), " + params.name;
  // By the mean, as the run's own replay costs its ops: the profile then replays to the
  // record's predicted bubble.
  keep(base + ".profile.json",
       measured_profile_json(out.trace, s.placement, plan, identity, ProfileStatistic::kMean)
           .dump(1));
}

// write_kept_run, whose failure (a full disk, a profile it cannot make) costs the files, not
// the row measured: said on stderr, and false for the row's `kept` counter.
bool keep_run(const std::string& what, const ScheduleParams& params, const WorkloadSpec& spec,
              const RunOutput& out) {
  try {
    write_kept_run(what, params, spec, out);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_pipeline_bench: %s-%s D=%d N=%d kept nothing: %s\n", what.c_str(),
                 params.name.c_str(), params.devices, params.microbatches, e.what());
    return false;
  }
}

RunOutput run_1f1b(const WorkloadSpec& spec, int devices, int microbatches, int partition_sms) {
  CudaRunOptions o;
  o.run.schedule = {"1f1b", devices, microbatches, 0, 0};
  o.run.steps = 2;
  o.run.warmup = 1;
  o.virtual_devices = devices;
  o.partition_sms = partition_sms;
  o.activation_arena_bytes = arena_bytes(spec, devices, microbatches);
  return run_cuda(spec, o);
}

void BM_Scaling(benchmark::State& state, int devices) {
  constexpr int kMicrobatches = 32;
  const WorkloadSpec spec = llama_shaped(kLayersPerStage * (devices - 1));
  for (auto _ : state) {
    try {
      // Only the figures of each run are kept: the pipelined run is gone before the single
      // partition's starts, so the two never hold the GPU or the host's memory together.
      double rate = 0, step_s = 0, measured_bubble = 0, replayed_bubble = 0;
      int k = 0;
      bool as_requested = false, kept = true;
      {
        const RunOutput piped = run_1f1b(spec, devices, kMicrobatches, 0);
        kept = keep_run("scaling", {"1f1b", devices, kMicrobatches, 0, 0}, spec, piped);
        const nlohmann::json& parts = piped.record["gpu"]["partitions"];
        k = parts["requested"]["sms_per_partition"].get<int>();
        as_requested = parts["as_requested"].get<bool>();
        rate = piped.record["throughput"]["samples_per_s"].get<double>();
        step_s = piped.record["step_time_s"].get<double>();
        measured_bubble = piped.record["measured"]["bubble_fraction"].get<double>();
        replayed_bubble = piped.record["predicted"]["bubble_fraction"].get<double>();
      }
      double rate_one = 0;
      {
        // The same work on one partition of the same k SMs, the others idle: against the
        // pipelined run's trace, which op slows most while the partitions share the GPU.
        const RunOutput one = run_1f1b(spec, 1, kMicrobatches, k);
        kept = keep_run("scaling-one-partition-of-D" + std::to_string(devices),
                        {"1f1b", 1, kMicrobatches, 0, 0}, spec, one) &&
               kept;
        rate_one = one.record["throughput"]["samples_per_s"].get<double>();
      }

      const double theory = theory_bubble(spec, {"1f1b", devices, kMicrobatches, 0, 0});
      const double closed = static_cast<double>(devices - 1) / (kMicrobatches + devices - 1);
      const double efficiency = rate / (devices * rate_one * (1 - theory));
      state.SetIterationTime(step_s);
      state.counters["scaling_efficiency"] = efficiency;
      state.counters["scaling_efficiency_uniform"] = rate / (devices * rate_one * (1 - closed));
      state.counters["goal_met"] = efficiency >= kGoalEfficiency ? 1 : 0;
      state.counters["samples_per_s"] = rate;
      state.counters["samples_per_s_one_partition"] = rate_one;
      state.counters["theory_bubble"] = theory;
      state.counters["closed_form_bubble"] = closed;
      state.counters["measured_bubble"] = measured_bubble;
      state.counters["compute_slowdown"] = devices * rate_one * (1 - measured_bubble) / rate;
      state.counters["pipeline_efficiency"] = (1 - measured_bubble) / (1 - theory);
      state.counters["replayed_bubble"] = replayed_bubble;
      state.counters["sms_per_partition"] = k;
      state.counters["partitions_as_requested"] = as_requested ? 1 : 0;
      state.counters["layers"] = kLayersPerStage * (devices - 1);
      state.counters["kept"] = kept ? 1 : 0;
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());  // e.g. not enough SMs for D partitions, out of memory
      return;
    }
  }
}

// --- (b) fidelity -----------------------------------------------------------------------------

void BM_Fidelity(benchmark::State& state, ScheduleParams params) {
  // Three layers per rank for one-stage-per-rank schedules; the 2D-stage ones get fewer.
  static const WorkloadSpec spec = llama_shaped(kLayersPerStage * (4 - 1));
  for (auto _ : state) {
    try {
      CudaRunOptions o;
      o.run.schedule = params;
      o.run.steps = 2;
      o.run.warmup = 1;
      o.virtual_devices = params.devices;
      const RunOutput out = run_cuda(spec, o);
      const bool kept = keep_run("fidelity", params, spec, out);
      const double measured = out.record["measured"]["bubble_fraction"].get<double>();
      const double predicted = out.record["predicted"]["bubble_fraction"].get<double>();
      const double gap = measured - predicted;
      state.SetIterationTime(out.record["step_time_s"].get<double>());
      state.counters["measured_bubble"] = measured;
      state.counters["predicted_bubble"] = predicted;
      state.counters["gap_pp"] = 100 * gap;
      state.counters["within_3pp"] = std::abs(100 * gap) <= 3 ? 1 : 0;
      state.counters["kept"] = kept ? 1 : 0;
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
}

// --- (c) executor overhead --------------------------------------------------------------------

const cuda::Shape kPayload{1, 64};  // 128 bytes of bf16

// Passes that do nothing: F and B pass their input on (a first or last stage, which has none,
// takes a fresh 128-byte block from the rank's arena), W returns at once.
class EmptyWork final : public StageWork<cuda::DTensor> {
 public:
  explicit EmptyWork(cuda::DeviceArena& arena) : arena_(arena) {}
  cuda::DTensor forward(int, int, cuda::DTensor input) override { return pass(std::move(input)); }
  cuda::DTensor backward(int, int, cuda::DTensor grad, bool) override {
    return pass(std::move(grad));
  }
  void backward_weight(int, int) override {}
  std::size_t saved_bytes(int) const override { return 0; }

 private:
  cuda::DTensor pass(cuda::DTensor t) {
    return t.empty() ? cuda::DTensor(arena_, kPayload, cuda::DType::kBF16, "empty pass") : t;
  }
  cuda::DeviceArena& arena_;
};

void BM_Overhead(benchmark::State& state, const ScheduleParams& params, cuda::StepMode mode) {
  const bool graph = mode == cuda::StepMode::kGraph;
  try {
    const Schedule s = generate(params);
    int visible = 0;
    CUDA_CHECK(cudaGetDeviceCount(&visible));
    GpuPlacementFlags f;
    // One rank: the whole GPU 0, as --cuda-graph needs; several: green-context partitions.
    if (params.devices > 1) f.virtual_devices = params.devices;
    f.devices = params.devices;
    f.visible_gpus = visible;
    // Declared in the order run_cuda uses, so they are destroyed in reverse: the executor, then
    // the transport, then the arenas (a failed step can leave the transport holding tensors whose
    // blocks go back to them), everything before the partitions' contexts.
    const std::unique_ptr<cuda::GpuDevices> devices = cuda::GpuDevices::open(plan_gpu_placement(f));
    std::vector<std::unique_ptr<cuda::DeviceArena>> arenas;
    std::vector<std::unique_ptr<EmptyWork>> ranks;
    std::vector<StageWork<cuda::DTensor>*> work;
    std::vector<cuda::DeviceArena*> arena_ptrs;
    for (int r = 0; r < params.devices; ++r) {
      devices->rank(r).make_current();
      arenas.push_back(
          std::make_unique<cuda::DeviceArena>("rank " + std::to_string(r), std::size_t{64} << 20));
      ranks.push_back(std::make_unique<EmptyWork>(*arenas.back()));
      work.push_back(ranks.back().get());
      arena_ptrs.push_back(arenas.back().get());
    }
    const std::shared_ptr<cuda::GpuTransport> transport =
        cuda::make_copy_transport(params.devices, std::nullopt);
    cuda::CudaExecutor executor(
        s, *devices, work, arena_ptrs, *transport,
        std::vector<cuda::Shape>(static_cast<std::size_t>(s.stages()), kPayload),
        cuda::DType::kBF16, {.cuda_graph = graph});
    executor.run_step();  // first use: stream, event and copy-path set-up; eager, before a capture
    if (graph) executor.run_step(mode);  // the capture (and its first launch), not measured

    double wall = 0, gpu_span = 0, compute_s = 0, handoff_s = 0, graph_s = 0;
    std::size_t compute_n = 0, handoff_n = 0;
    bool per_action_timing = true;
    for (auto _ : state) {
      // The wall time holds the whole of run_step: the ranks' walks (or the graphs' launches),
      // and reading back each action's timing events into the trace, which every step that
      // records its trace pays.
      const auto t0 = WallClock::now();
      const cuda::CudaStepRecord record = executor.run_step(mode);
      wall += std::chrono::duration<double>(WallClock::now() - t0).count();
      state.PauseTiming();  // summing the trace here is the benchmark's own cost
      if (record.graph) {
        graph_s += record.graph->step_seconds;
        per_action_timing = per_action_timing && record.graph->per_action_timing;
      }
      gpu_span += makespan_of(record.trace);
      for (const ComputeEvent& e : record.trace.compute) compute_s += e.end - e.start;
      for (const CommEvent& e : record.trace.comm) handoff_s += e.end - e.start;
      compute_n += record.trace.compute.size();
      handoff_n += record.trace.comm.size();
      state.ResumeTiming();
    }
    const double steps =
        static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
    const double actions = static_cast<double>(s.action_count());
    const auto per_rank_action = [&](double seconds) {
      return 1e6 * seconds / steps * params.devices / actions;
    };
    const double per_rank = per_rank_action(wall);
    state.counters["us_per_rank_action"] = per_rank;
    state.counters["gpu_us_per_rank_action"] = per_rank_action(gpu_span);
    state.counters["us_per_action"] = 1e6 * wall / steps / actions;
    // 0: the driver refused the graph's timing events, and the trace (gpu_us_per_rank_action,
    // compute_us, handoff_us) is empty; the graph's own launch-to-completion time still counts.
    state.counters["per_action_timing"] = per_action_timing ? 1 : 0;
    if (graph) {
      // A replayed step's cost is its graphs' launch to completion: no host walk, and no
      // read-back of the timings, which the wall time above holds.
      const double replay = per_rank_action(graph_s);
      state.counters["graph_us_per_rank_action"] = replay;
      state.counters["under_3us"] = replay < 3 ? 1 : 0;
    } else {
      state.counters["under_10us"] = per_rank < 10 ? 1 : 0;
    }
    state.counters["compute_us"] = compute_n ? 1e6 * compute_s / static_cast<double>(compute_n) : 0;
    state.counters["handoff_us"] = handoff_n ? 1e6 * handoff_s / static_cast<double>(handoff_n) : 0;
    state.counters["actions"] = actions;
    state.counters["sms_per_partition"] = devices->rank(0).sms;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// --- registration -----------------------------------------------------------------------------

ScheduleParams params_of(std::string_view family, int devices, int microbatches) {
  return {std::string(family), devices, microbatches, find_schedule(family).uses_chunks ? 2 : 0, 0};
}

// Whether the family's generator takes `p` (host-only: no GPU needed).
bool accepted(const ScheduleParams& p) {
  try {
    generate(p);
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

std::string name_of(const char* bench, const ScheduleParams& p) {
  std::string name = std::string(bench) + "/" + p.name + "/D" + std::to_string(p.devices) + "/N" +
                     std::to_string(p.microbatches);
  return p.chunks > 0 ? name + "/v" + std::to_string(p.chunks) : name;
}

// Steps of one repetition of a BM_Overhead row: about 2,560 micro-batches' worth, tens of
// milliseconds of empty steps. Fixed, because each call of the function builds the partitions,
// arenas and executor again, and Google Benchmark's search for an iteration count (MinTime)
// would call it four or five times per repetition: minutes over the 62 rows, where gpu-check
// gives the program one step limit and a program stopped at it leaves a cut --benchmark_out file
// (gpu-check keeps the rows that finished from its log: main() line-buffers stdout).
constexpr int kOverheadMicrobatches = 2560;

// Wall clock: the ranks' host threads and the GPU are what is measured, not this thread's CPU
// time. The median of three resists a stall of the shared host.
void register_overhead(const char* bench, const ScheduleParams& p, cuda::StepMode mode) {
  benchmark::RegisterBenchmark(name_of(bench, p).c_str(), BM_Overhead, p, mode)
      ->UseRealTime()
      ->Iterations(std::max(20, kOverheadMicrobatches / p.microbatches))
      ->Repetitions(3)
      ->DisplayAggregatesOnly(true)
      ->Unit(benchmark::kMicrosecond);
}

void register_benchmarks() {
  for (int d : {2, 4, 8})
    benchmark::RegisterBenchmark(name_of("BM_Scaling", params_of("1f1b", d, 32)).c_str(),
                                 BM_Scaling, d)
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  for (const ScheduleInfo& info : all_schedules()) {
    const ScheduleParams p = params_of(info.name, 4, 8);
    benchmark::RegisterBenchmark(name_of("BM_Fidelity", p).c_str(), BM_Fidelity, p)
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (const char* family : {"1f1b", "gpipe", "zb-h1", "interleaved-1f1b", "dualpipe"})
    for (int d : {2, 4, 8})
      for (int n : {8, 32, 128}) {
        const ScheduleParams p = params_of(family, d, n);
        // A size the family refuses (DualPipe needs N >= 2D: D8/N8) is left out: registered,
        // it would only report an error and fail gpu-check's benchmarks piece.
        if (!accepted(p)) continue;
        register_overhead("BM_Overhead", p, cuda::StepMode::kEager);
      }
  // One rank on the whole GPU, eager and from a CUDA graph, side by side.
  for (const char* family : {"1f1b", "gpipe", "zb-h1"})
    for (int n : {8, 32, 128}) {
      const ScheduleParams p = params_of(family, 1, n);
      register_overhead("BM_Overhead", p, cuda::StepMode::kEager);
      register_overhead("BM_OverheadGraph", p, cuda::StepMode::kGraph);
    }
}

// --benchmark_list_tests needs no GPU: the names are known before anything runs.
bool listing_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true" ||
        a == "--benchmark_list_tests=1")
      return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  line_buffered_output();
  const bool listing = listing_only(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  std::string why;
  if (!listing && !cuda::has_gpu(&why)) {
    std::printf("cuda_pipeline_bench: skipped, no CUDA device visible (%s); nothing was run\n",
                why.c_str());
    return 0;
  }
  add_benchmark_context();
  benchmark::AddCustomContext("gpu", cuda::device_info_text());
  benchmark::AddCustomContext("model",
                              "Llama-3-8B layer shape, 3 layers per stage + LM head stage, seq " +
                                  std::to_string(kSeq) + ", micro-batch 1, bf16");
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
