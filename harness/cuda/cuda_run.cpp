#include "harness/cuda/cuda_run.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "harness/backends/run_loop.h"
#include "harness/backends/run_record.h"
#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_memory.h"
#include "harness/cuda/gpu_model.h"
#include "harness/cuda/gpu_optimizer.h"
#include "harness/cuda/grad_summary.h"
#include "harness/cuda/graph_record.h"
#include "harness/cuda/link_model.h"
#include "harness/cuda/nccl_api.h"
#include "harness/cuda/sm_probe.h"
#include "harness/cuda/transport_factory.h"
#include "harness/cuda_step_memory.h"
#include "harness/metrics.h"
#include "harness/provenance.h"
#include "harness/replay.h"
#include "harness/report_json.h"
#include "harness/simulator.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "workloads/cuda/arena.h"
#include "workloads/cuda/attention_core.h"
#include "workloads/cuda/device_info.h"
#include "workloads/partition.h"

namespace ppbench {

namespace {

using cuda::GpuPipelineRank;

GpuPlacement placement_of(const CudaRunOptions& o, int ranks, int visible) {
  GpuPlacementFlags f;
  f.gpus = o.gpus;
  f.virtual_devices = o.virtual_devices;
  f.virtual_device_gpu = o.virtual_device_gpu;
  f.devices = ranks;
  f.visible_gpus = visible;
  return plan_gpu_placement(f);
}

}  // namespace

void check_cuda_run_options(const WorkloadSpec& spec, const CudaRunOptions& o) {
  check_step_counts(o.run.steps, o.run.warmup);
  cuda::require_gpu_workload(spec);
  require(!o.run.recompute,
          "--recompute is not implemented on the CUDA backend yet (use --backend cpu)");
  // Each rank's graph must stand alone: NCCL synchronises peers on the devices, the copy
  // transport's host-side hand-over cannot be captured robustly (gpu_transport.h).
  require(!o.cuda_graph || o.virtual_devices.value_or(1) == 1, cuda::kCudaGraphNeedsGpus);
  require(o.partition_sms == 0 || o.virtual_devices.has_value(),
          "--sms-per-device " + std::to_string(o.partition_sms) +
              " sizes the partitions of --virtual-devices; without it each rank has a whole GPU");
  const bool link = o.link_bandwidth_gb_per_s || o.link_latency_us;
  require(!link || o.virtual_devices.has_value(),
          "--link-bandwidth / --link-latency emulate a link between virtual devices; "
          "they need --virtual-devices (real GPUs have real links)");
  make_link_model(o.link_bandwidth_gb_per_s, o.link_latency_us);  // validates the values
}

namespace {

// The measured steps; every device resource is released on return.
RunOutput run_measured(const WorkloadSpec& spec, const CudaRunOptions& o, const Schedule& s,
                       const PartitionPlan& plan, const GpuPlacement& gp) {
  const std::optional<LinkModel> link =
      make_link_model(o.link_bandwidth_gb_per_s, o.link_latency_us);
  std::unique_ptr<cuda::GpuDevices> devices = cuda::GpuDevices::open(gp, o.partition_sms);
  // Virtual devices: each rank's kernels must run on its partition's SMs alone; the record says
  // what a probe kernel on each rank's stream saw (harness/cuda/sm_probe.h).
  std::optional<cuda::SmProbeReport> probe;
  if (devices->virtual_devices) {
    std::vector<std::vector<int>> seen;
    std::vector<int> granted;
    for (int r = 0; r < devices->ranks(); ++r) {
      const cuda::RankDevice& rd = devices->rank(r);
      rd.make_current();
      seen.push_back(cuda::sms_used(rd.compute, 8 * std::max(rd.sms, 1)));
      granted.push_back(rd.sms);
    }
    devices->release_current();
    probe = cuda::judge_sm_probe(std::move(seen), granted);
    if (!probe->disjoint || !probe->within_grant)
      std::cerr << "ppbench: warning: virtual devices are not isolated: " << probe->summary << "\n";
  }
  // Declared before the transport so that they outlive it: after a failed step the transport may
  // still hold tensors (sends never received) whose blocks go back to the ranks' arenas. The
  // optimizer's arenas too: freeing device memory waits for the device, and after a failed CUDA
  // graph replay only the transport's destructor aborts the NCCL kernels it would wait for.
  std::vector<std::unique_ptr<GpuPipelineRank>> ranks;
  std::unique_ptr<cuda::GpuOptimizer> optimizer;
  std::shared_ptr<cuda::GpuTransport> transport = gp.uses_nccl()
                                                      ? cuda::make_nccl_transport(gp.gpus)
                                                      : cuda::make_copy_transport(gp.ranks(), link);
  const cuda::DType dt = cuda::gpu_dtype(spec);
  // The whole device before anything of the run is on it (the record's memory.device).
  const std::vector<cuda::DeviceUse> used_before = cuda::device_use(*devices);

  // Ranks and their arenas, each built with its context current. Without an explicit size,
  // each rank's activation arena gets an equal share of what its GPU has free.
  for (int r = 0; r < gp.ranks(); ++r) {
    devices->rank(r).make_current();
    std::size_t act = o.activation_arena_bytes;
    if (act == 0) {
      std::size_t free = 0, total = 0;
      CUDA_CHECK(cudaMemGetInfo(&free, &total));
      const std::size_t sharing =
          gp.kind == GpuPlacement::Kind::Gpus ? 1 : static_cast<std::size_t>(gp.ranks() - r);
      const std::size_t reserve =
          cuda::rank_static_bytes(spec, plan, s.placement, r) +
          cuda::optimizer_reserve_bytes(spec, plan, s.placement, r, o.run.optimizer.kind) +
          (std::size_t{256} << 20);
      act = free > reserve * sharing ? (free - reserve * sharing) / sharing * 8 / 10
                                     : (std::size_t{64} << 20);
    }
    ranks.push_back(std::make_unique<GpuPipelineRank>(spec, plan, s.placement, r, o.run.seed,
                                                      devices->rank(r).compute, act));
    // GEMMs planned for the SMs the rank has (a partition), not the whole GPU's.
    ranks.back()->context().sm_count_target = devices->rank(r).sms;
  }
  devices->release_current();
  std::vector<StageWork<cuda::DTensor>*> work;
  std::vector<cuda::DeviceArena*> arenas;
  for (auto& r : ranks) work.push_back(r.get()), arenas.push_back(&r->activations());
  cuda::CudaExecutor executor(
      s, *devices, work, arenas, *transport, cuda::stage_output_shapes(spec, plan, s.placement), dt,
      {.watchdog_seconds = o.run.executor.watchdog_seconds, .cuda_graph = o.cuda_graph});
  // Each stage updated right after its last backward on its rank (gpu_optimizer.h).
  if (o.run.optimizer.enabled()) {
    std::vector<GpuPipelineRank*> plain;
    for (auto& r : ranks) plain.push_back(r.get());
    optimizer = std::make_unique<cuda::GpuOptimizer>(o.run.optimizer, s.placement, *devices, plain);
    devices->release_current();
    executor.set_stage_done(
        [opt = optimizer.get()](int rank, int stage) { return opt->stage_done(rank, stage); });
  }

  // With --cuda-graph the warm-up (at least one step) runs eagerly, the first measured step
  // captures every rank's step and launches it, and each later one launches it again.
  const int warmup = o.cuda_graph ? cuda::eager_steps_before_capture(o.run.warmup) : o.run.warmup;
  const int parts = static_cast<int>(plan.stages.size());
  cuda::CudaStepRecord last, last_eager;
  StepValues values;
  const RunTimings timings = run_steps(warmup, o.run.steps, o.run.progress, [&](int k, bool final) {
    const bool graph_step = o.cuda_graph && k >= warmup;
    for (int r = 0; r < gp.ranks(); ++r) {
      devices->rank(r).make_current();
      ranks[static_cast<std::size_t>(r)]->zero_grad(graph_step && executor.graph_captured());
      CUDA_CHECK(cudaStreamSynchronize(devices->rank(r).compute));
    }
    devices->release_current();
    if (optimizer) optimizer->begin_step();
    last = executor.run_step(graph_step ? cuda::StepMode::kGraph : cuda::StepMode::kEager);
    if (!graph_step) last_eager = last;
    StepOutcome outcome;
    outcome.note = graph_step ? "CUDA graph" : "";
    // Reading the loss waits for every micro-batch's: only where it is shown or kept.
    if (final || o.run.progress) outcome.loss = values.loss = cuda::mean_loss(*devices, ranks);
    // A replay whose timing events the driver would not time has only its total time; its
    // per-action metrics and memory samples then come from the last eager step.
    const bool total_only = last.graph && !last.graph->per_action_timing;
    outcome.makespan_s = total_only ? last.graph->step_seconds : makespan_of(last.trace);
    if (total_only) {
      std::vector<double> device_peak = last.device_peak_bytes;
      std::optional<cuda::GraphStepInfo> info = last.graph;
      last = last_eager;
      last.device_peak_bytes = device_peak;
      last.graph = info;
    }
    return outcome;
  });

  const std::vector<cuda::DeviceUse> used_after = cuda::device_use(*devices);
  // The gradients' statistics, once, after the last step; the tensors only where asked for.
  cuda::summarize_gradients(spec, *devices, ranks, parts, o.run.keep_gradients || o.run.check,
                            values);
  RunOutput out;
  out.trace = last.trace;
  out.values = std::move(values);
  nlohmann::json r =
      run_record({&spec, &s, &plan, o.run.seed, false, timings, &out.trace, out.values}, "cuda");
  std::vector<double> measured;
  for (const ActivationArena& a : last.arenas) measured.push_back(a.peak());
  r["activation_bytes"] = activation_bytes_json(
      measured, predicted_peak_bytes(s, cuda_activation_plan(spec, plan), false),
      last.device_peak_bytes);
  r["optimizer"] = optimizer_json(o.run.optimizer);
  // Measured from the tensors each rank holds; activations as on the CPU (kept bytes, the
  // ActivationArena's peak); comm is not counted by the GPU transports.
  std::vector<HeldMemory> held(ranks.size());
  std::vector<cuda::ArenaUse> arena_use;
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    for (const auto& sp : ranks[k]->params_by_layer())
      for (const cuda::Param* p : all_params(sp)) {
        held[k].params += static_cast<double>(p->value.bytes());
        held[k].grads += static_cast<double>(p->grad.bytes());
      }
    if (optimizer) held[k].optimizer = optimizer->state_bytes(static_cast<int>(k));
    held[k].activations = measured.at(k);
    arena_use.push_back(
        {static_cast<double>(ranks[k]->activations().capacity()), last.device_peak_bytes.at(k)});
  }
  r["memory"] = memory_json(held, cuda_step_memory(spec, s, plan, {o.run.optimizer.kind, false}));
  r["memory"]["device"] = cuda::device_memory_json(used_before, used_after, arena_use);
  nlohmann::json g;
  g["placement"] = describe(gp);
  g["gpu_names"] = devices->gpu_names;
  g["transport"] = cuda::transport_name(*transport);
  cuda::CudaGraphSummary graph;
  graph.enabled = o.cuda_graph;
  if (o.cuda_graph) {
    const cuda::GraphCaptureInfo& c = executor.capture_info();
    graph.eager_steps = warmup;
    graph.capture_seconds = c.capture_seconds;
    graph.nodes = c.nodes;
    graph.event_record_nodes = c.event_record_nodes;
    graph.timing = last.graph && !last.graph->per_action_timing ? cuda::GraphTiming::kEagerTrace
                                                                : cuda::GraphTiming::kEventNodes;
    if (last.graph) graph.launch_to_done_s = last.graph->launch_to_done_s;
  }
  g["cuda_graph"] = cuda::to_json(graph);
  g["nccl_version"] = cuda::nccl_version_text();  // "not loaded" where the run did not need it
  g["nccl_plan"] = {{"hoisted_receives", executor.hoisted_receives()},
                    {"deferred_sends", executor.deferred_sends()}};
  nlohmann::json sms = nlohmann::json::array();
  for (int k = 0; k < devices->ranks(); ++k) sms.push_back(devices->rank(k).sms);
  g["sms_per_rank"] = sms;
  if (devices->virtual_devices) {
    const SmPartitionPlan& pp = devices->partition_plan;
    g["partitions"] = {{"requested",
                        {{"total_sms", pp.total_sms},
                         {"partitions", pp.partitions},
                         {"sms_per_partition", pp.sms_per_partition},
                         {"idle_sms", pp.idle_sms}}},
                       {"granted_sms", devices->grant.granted_sms},
                       {"as_requested", devices->grant.as_requested},
                       {"summary", devices->grant.summary},
                       {"granularity",
                        {{"min_partition_sms", devices->granularity.min_partition_sms},
                         {"alignment", devices->granularity.alignment}}}};
  }
  g["link"] = link ? nlohmann::json(link->describe()) : nlohmann::json(nullptr);
  if (probe) {
    nlohmann::json counts = nlohmann::json::array();
    for (const auto& seen : probe->per_rank) counts.push_back(seen.size());
    g["sm_probe"] = {{"sms_seen_per_rank", counts},
                     {"disjoint", probe->disjoint},
                     {"within_grant", probe->within_grant},
                     {"summary", probe->summary}};
  }
  r["gpu"] = g;
  out.record = std::move(r);
  return out;
}

}  // namespace

RunOutput run_cuda(const WorkloadSpec& spec, const CudaRunOptions& o) {
  check_cuda_run_options(spec, o);
  // A bad PPBENCH_FLASH is the user's to fix: say so here, not from inside a rank's first pass.
  (void)cuda::flash_path_from_environment();
  const Schedule s = schedule_of(o.run);
  cuda::check_gpu_optimizer(s.placement, o.run.optimizer, o.cuda_graph);
  validate(s, {.channel_capacity = 0});
  const PartitionPlan plan = partition(spec, s.placement.stages_per_chain(), o.run.partition);
  // The flags' own checks before the machine's: a bad --gpus is exit 2 on any machine.
  (void)placement_of(o, s.placement.ranks, -1);
  std::string why;
  if (!cuda::has_gpu(&why))
    throw EnvironmentError("--backend cuda: no CUDA device visible (" + why + ")");
  int visible = 0;
  CUDA_CHECK(cudaGetDeviceCount(&visible));
  const GpuPlacement gp = placement_of(o, s.placement.ranks, visible);
  // Too little device memory for what was asked, whether the arenas cannot be reserved or a
  // step outgrows them, arrives as ppbench::OutOfMemory: the machine's limit (exit code 3).
  RunOutput out = run_measured(spec, o, s, plan, gp);
  if (o.run.check) {
    // The same step on one device: the first GPU of the run, whole, one rank holding every
    // layer, the naive schedule over the same micro-batches, in the same dtype. The measured
    // run has released its devices, so the reference has the whole GPU.
    CudaRunOptions ref;
    ref.run = o.run;
    ref.run.schedule = {"naive", 1, s.params.microbatches, 0, 0};
    ref.run.partition = "uniform";
    // As many steps as the run took (warm-up included), so that its optimizer has stepped as
    // often before the compared gradients; without an optimizer every step is the same.
    const int eager = o.cuda_graph ? cuda::eager_steps_before_capture(o.run.warmup) : o.run.warmup;
    ref.run.steps = o.run.optimizer.enabled() ? eager + o.run.steps : 1;
    ref.run.warmup = 0;
    ref.run.progress = false;
    ref.run.check = false;
    ref.run.keep_gradients = true;
    ref.gpus = std::to_string(gp.gpus.at(0));
    const Schedule rs = generate(ref.run.schedule);
    const PartitionPlan rplan = partition(spec, 1, "uniform");
    const RunOutput reference = run_measured(spec, ref, rs, rplan, placement_of(ref, 1, visible));
    const double tol =
        o.run.check_tolerance > 0 ? o.run.check_tolerance : check_tolerance(spec.dtype);
    const GradientComparison c = compare_gradients(out.values.tensors, reference.values.tensors);
    const std::string described = "one device: GPU " + std::to_string(gp.gpus.at(0)) +
                                  " whole, naive schedule, same dtype and micro-batches";
    out.record["check"] = check_json(c, tol, out.values.loss, reference.values.loss, described);
    // As on the CPU: a miss is judged again against how far one rounding of the dtype moves
    // the step.
    if (o.reference_spread && spread_may_explain(out.record["check"], c, o.run.check_tolerance)) {
      std::string unmeasured;
      if (const std::optional<ReferenceSpread> spread =
              o.reference_spread(spec, s.params.microbatches, ref.run.steps, &unmeasured))
        out.record["check"] =
            check_json(c, tol, out.values.loss, reference.values.loss, described, &*spread);
      else
        out.record["check"]["reference_spread_note"] = unmeasured;
    }
  }
  if (!o.run.keep_gradients) out.values.tensors.clear();
  return out;
}

}  // namespace ppbench
