#include "harness/mpi/cuda_mpi_run.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "harness/backends/run_loop.h"
#include "harness/backends/run_record.h"
#include "harness/cuda/cuda_executor.h"
#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_model.h"
#include "harness/cuda/grad_summary.h"
#include "harness/cuda/local_gpu.h"
#include "harness/cuda/nccl_api.h"
#include "harness/cuda/nccl_comm.h"
#include "harness/cuda_step_memory.h"
#include "harness/metrics.h"
#include "harness/mpi/gpu_collectives.h"
#include "harness/mpi/gpu_process_optimizer.h"
#include "harness/mpi/job_report.h"
#include "harness/mpi/launch_check.h"
#include "harness/mpi/mpi_session.h"
#include "harness/mpi/nccl_bootstrap.h"
#include "harness/mpi/part_gradients.h"
#include "harness/mpi/wire.h"
#include "schedules/validate.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/device_info.h"
#include "workloads/partition.h"

namespace ppbench {

namespace {

using mpi::check;
using mpi::init_nccl_comm;

#if PPBENCH_HAVE_NCCL_H

RunOutput run_job(const WorkloadSpec& spec, const CudaRunOptions& o, const DataParallelOptions& dp,
                  const Schedule& s, const PartitionPlan& plan, int gpu, mpi::World& world,
                  mpi::Grid& grid) {
  const int d = s.placement.ranks, n = s.params.microbatches, me = grid.pipeline_rank;
  const mpi::ClockOffset to_root = mpi::clock_offset_to_root(world);
  const double offset = to_root.seconds;
  // Every rank of the schedule "on" this process's GPU: the executor wants a device per rank,
  // and only rank `me`'s streams and context are ever used here.
  GpuPlacement gp;
  gp.gpus.assign(static_cast<std::size_t>(d), gpu);
  std::unique_ptr<cuda::GpuDevices> devices = cuda::GpuDevices::open(gp);
  const cuda::RankDevice& dev = devices->rank(me);
  dev.make_current();
  CUDA_CHECK(cudaSetDevice(gpu));

  std::size_t act = o.activation_arena_bytes;
  if (act == 0) {
    std::size_t free = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free, &total));
    const std::size_t reserve =
        cuda::rank_static_bytes(spec, plan, s.placement, me) +
        cuda::optimizer_reserve_bytes(spec, plan, s.placement, me, o.run.optimizer.kind) +
        (std::size_t{256} << 20);
    act = free > reserve ? (free - reserve) * 8 / 10 : (std::size_t{64} << 20);
  }
  cuda::GpuPipelineRank rank(spec, plan, s.placement, me, o.run.seed, dev.compute, act,
                             grid.replica * n, n * dp.replicas);
  // After the rank, so that it outlives the transport: after a failed step the transport may
  // still hold sent tensors whose blocks go back to the rank's arena (as in cuda_run.cpp).
  // Every process makes its pipeline's communicator first, then its replicas' one.
  std::shared_ptr<cuda::GpuTransport> transport =
      cuda::make_nccl_rank_transport(init_nccl_comm(grid.pipeline), me, d);
  ncclComm_t data_comm = dp.replicas > 1 ? init_nccl_comm(grid.data) : nullptr;
  // params_by_layer() lists the rank's stages in stage order, as RankStages does.
  const RankStages placed(s.placement);
  std::unique_ptr<mpi::GpuGradientAllReduce> reduce;
  if (data_comm)
    reduce = std::make_unique<mpi::GpuGradientAllReduce>(data_comm, rank.params_by_layer(),
                                                         placed.of(me), me);
  // After the all-reduce, each stage updated from its summed gradients (gpu_process_optimizer.h);
  // its communicator, where it needs one, comes after the replicas' one on every process.
  std::unique_ptr<mpi::GpuProcessOptimizer> optimizer;
  if (o.run.optimizer.enabled())
    optimizer = std::make_unique<mpi::GpuProcessOptimizer>(o.run.optimizer, s.placement, *devices,
                                                           rank, me, placed.of(me), grid.pipeline);
  std::vector<StageWork<cuda::DTensor>*> work(static_cast<std::size_t>(d), nullptr);
  std::vector<cuda::DeviceArena*> arenas(static_cast<std::size_t>(d), nullptr);
  work[static_cast<std::size_t>(me)] = &rank;
  arenas[static_cast<std::size_t>(me)] = &rank.activations();
  const cuda::DType dt = cuda::gpu_dtype(spec);
  cuda::CudaExecutor executor(s, *devices, work, arenas, *transport,
                              cuda::stage_output_shapes(spec, plan, s.placement), dt,
                              {.watchdog_seconds = o.run.executor.watchdog_seconds});
  // --dp-overlap: each stage's all-reduce is enqueued on its own stream right after the stage's
  // last backward, and the walk goes on (nothing is timed on the compute stream for it).
  const bool overlap = reduce && dp.overlap;
  if (overlap)
    executor.set_stage_done([&reduce, &dev](int, int stage) {
      reduce->start(stage, dev.compute);
      return false;
    });
  dev.make_current();

  cuda::CudaStepRecord last;
  RunOutput out;
  double step_start = 0;
  out.report = world.rank() == 0;
  const RunTimings timings =
      run_steps(o.run.warmup, o.run.steps, o.run.progress && out.report, [&](int, bool) {
        rank.zero_grad();
        CUDA_CHECK(cudaStreamSynchronize(dev.compute));
        // One clock for the step: process 0's, read after a barrier (as mpi_run.cpp).
        const double root_origin =
            mpi::start_step_together(world.comm(), o.run.executor.spin(/*own_cores=*/true));
        const auto clock = [&] { return mpi::steady_seconds() + offset - root_origin; };
        if (overlap) reduce->begin_step(dev.compute, clock);
        last = executor.run_rank_step(me);
        // The rank's events, measured from its start on this host's clock, onto process 0's.
        const double shift = last.host_start_s + offset - root_origin;
        step_start = shift;
        for (auto& e : last.trace.compute) e.start += shift, e.end += shift;
        for (auto& e : last.trace.comm) e.start += shift, e.end += shift;
        for (auto& e : last.trace.memory) e.time += shift;
        if (reduce)
          last.trace.collectives = overlap ? reduce->finish() : reduce->run(dev.compute, clock);
        if (optimizer) last.trace.updates = optimizer->step(clock);
        double loss = 0;
        for (auto [mb, l] : rank.losses()) loss += l;
        const mpi::JobStep job =
            mpi::agree_on_step(world.comm(), last.trace, loss, n * dp.replicas);
        out.values.loss = job.loss;
        return StepOutcome{job.makespan, job.loss, ""};
      });

  HeldMemory held;
  for (const auto& sp : rank.params_by_layer())
    for (const cuda::Param* p : all_params(sp)) {
      held.params += static_cast<double>(p->value.bytes());
      held.grads += static_cast<double>(p->grad.bytes());
    }
  held.optimizer = optimizer ? optimizer->state_bytes() : 0;
  held.activations = last.arenas.at(static_cast<std::size_t>(me)).peak();
  mpi::ProcessReport mine{.trace = last.trace,
                          .held = held,
                          .clock_offset = offset,
                          .clock_offset_uncertainty = to_root.uncertainty,
                          .step_start = step_start,
                          .host = world.host(),
                          .node_leader = world.node_leader(),
                          .local_rank = world.local_rank()};
  const auto reports = mpi::gather_bytes(world.comm(), mine.encode());
  cuda::DeviceGradientStats on_device(rank);
  mpi::replica0_gradients(
      spec, s.placement, grid, world.comm(), static_cast<int>(plan.stages.size()),
      o.run.keep_gradients || o.run.check, out.report, rank.params_by_layer(),
      [](const cuda::Param& p) { return cuda::download_cpu_layout(p, p.grad); },
      [&](PartGradients& stats, const cuda::Param& p) {
        on_device.add(stats, p.grad.as<float>(), p.grad.numel());
      },
      out.values);
  if (!out.report) return out;

  const std::vector<mpi::ProcessReport> procs = mpi::decode_reports(reports, d);
  const Trace replica0 = mpi::replica0_trace(procs, d, "cuda");
  std::vector<double> peaks;
  std::vector<HeldMemory> held_by_rank;
  for (int p = 0; p < d; ++p) {
    peaks.push_back(procs[static_cast<std::size_t>(p)].held.activations);
    held_by_rank.push_back(procs[static_cast<std::size_t>(p)].held);
  }

  nlohmann::json r = run_record({&spec, &s, &plan, o.run.seed, false, timings, &replica0,
                                 out.values, dp.replicas, dp.overlap},
                                "cuda");
  r["activation_bytes"] = activation_bytes_json(
      peaks, predicted_peak_bytes(s, cuda_activation_plan(spec, plan), false));
  r["optimizer"] = optimizer_json(o.run.optimizer);
  // Each process's tensors (comm is not counted by the GPU transports), beside the model.
  r["memory"] =
      memory_json(held_by_rank, cuda_step_memory(spec, s, plan, {o.run.optimizer.kind, false}));
  r["launch"] = {{"transport", "nccl"},
                 {"processes", world.size()},
                 {"pipeline_ranks", d},
                 {"replicas", dp.replicas},
                 {"mpi", mpi::mpi_library_json(mpi::process_environment())}};
  r["gpu"] = {{"placement", "one GPU per process, by local rank"},
              {"gpu_names", devices->gpu_names.front()},
              {"transport", cuda::transport_name(*transport)},
              {"nccl_version", cuda::nccl_version_text()}};
  r["data_parallel"] =
      mpi::job_json(procs, s.placement, n, static_cast<double>(spec.microbatch_size), dp.overlap);
  mpi::finish_job_record(out, std::move(r), spec, o.run, n, dp.replicas, procs, d, "cuda");
  return out;
}

#endif  // PPBENCH_HAVE_NCCL_H

}  // namespace

RunOutput run_cuda_mpi(const WorkloadSpec& spec, const CudaRunOptions& o,
                       const DataParallelOptions& dp) {
  mpi::World& world = mpi::World::get();
  std::unique_ptr<Schedule> s;
  std::unique_ptr<PartitionPlan> plan;
  int gpu = -1;
  mpi::agree_to_start(world, [&] {
    mpi::require_process_count(
        world, o.run.file_schedule ? o.run.file_schedule->placement.ranks : o.run.schedule.devices,
        dp.replicas);
    require(!o.virtual_devices,
            "--virtual-devices splits one GPU among the ranks of one process; across processes "
            "each process takes the GPU of its local rank (drop --virtual-devices, or run "
            "without mpirun)");
    require(!o.gpus,
            "--gpus lists the GPUs of one process's ranks; across processes each process takes "
            "the GPU of its local rank (drop --gpus; CUDA_VISIBLE_DEVICES chooses the GPUs)");
    require(!o.cuda_graph,
            "--cuda-graph runs in one process only (--gpus); across processes it is not "
            "supported yet (run without --cuda-graph)");
    check_cuda_run_options(spec, o);
    s = std::make_unique<Schedule>(schedule_of(o.run));
    validate(*s, {.channel_capacity = 0});
    plan = std::make_unique<PartitionPlan>(
        partition(spec, s->placement.stages_per_chain(), o.run.partition));
    cuda::check_transfer_plan(*s, cuda::stage_output_shapes(spec, *plan, s->placement),
                              cuda::gpu_dtype(spec));
    if (!cuda::nccl_compiled_in())
      throw EnvironmentError(
          "--backend cuda across processes needs NCCL, and this build has none (nccl.h was "
          "not found by CMake)");
    std::string why;
    if (!cuda::has_gpu(&why))
      throw EnvironmentError("--backend cuda: no CUDA device visible (" + why + ")");
    int visible = 0;
    CUDA_CHECK(cudaGetDeviceCount(&visible));
    // The launcher's local rank where it gives one, else MPI's own view of the node.
    const int local_processes = world.local_size();
    // A launcher variable left over from an outer launch (srun around mpirun) can name a rank
    // this node does not have: MPI's own count decides then.
    const LocalRank local = local_rank_from_env();
    const bool env_fits = local.rank >= 0 && local.rank < local_processes;
    gpu = gpu_of_local_rank(env_fits ? local.rank : world.local_rank(), local_processes, visible);
    if (!cuda::try_load_nccl(&why)) throw EnvironmentError(why);
  });
  mpi::require_one_job(world, mpi::job_parts(*s, spec, *plan, o.run, dp.replicas, dp.overlap));
#if PPBENCH_HAVE_NCCL_H
  mpi::Grid grid(world, s->placement.ranks, dp.replicas);
  return run_job(spec, o, dp, *s, *plan, gpu, world, grid);
#else
  throw std::logic_error("unreachable: a build without nccl.h refuses above");
#endif
}

}  // namespace ppbench
