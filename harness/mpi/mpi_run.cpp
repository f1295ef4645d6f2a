#include "harness/mpi/mpi_run.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <tuple>

#include "core/cpu_cores.h"
#include "core/error.h"
#include "core/timer_slack.h"
#include "harness/backends/cpu/cpu_run.h"
#include "harness/backends/cpu/pipeline_rank.h"
#include "harness/backends/run_loop.h"
#include "harness/backends/run_record.h"
#include "harness/executor/cpu_executor.h"
#include "harness/metrics.h"
#include "harness/mpi/cpu_codec.h"
#include "harness/mpi/gradient_allreduce.h"
#include "harness/mpi/job_report.h"
#include "harness/mpi/launch_check.h"
#include "harness/mpi/mpi_session.h"
#include "harness/mpi/mpi_transport.h"
#include "harness/mpi/part_gradients.h"
#include "harness/mpi/process_optimizer.h"
#include "harness/mpi/wire.h"
#include "schedules/validate.h"
#include "workloads/cpu/gemm_library.h"
#include "workloads/partition.h"

namespace ppbench {

namespace {

using mpi::check;
using mpi::ProcessReport;

template <typename T>
RunOutput run_typed(const WorkloadSpec& spec, const RunOptions& o, const DataParallelOptions& dp,
                    const Schedule& s, const PartitionPlan& plan, mpi::World& world,
                    mpi::Grid& grid) {
  const int d = s.placement.ranks, n = s.params.microbatches, me = grid.pipeline_rank;
  const mpi::ClockOffset to_root = mpi::clock_offset_to_root(world);
  const double offset = to_root.seconds;

  // This replica's micro-batches: d*N .. d*N + N - 1 of the R * N the step averages over.
  std::vector<cpu::MicroBatch<T>> data;
  for (int m = 0; m < n; ++m)
    data.push_back(cpu::make_microbatch<T>(spec, o.seed, grid.replica * n + m));
  cpu::PipelineRank<T> rank(spec, plan, s.placement, me, data, o.seed, o.recompute,
                            n * dp.replicas);
  std::vector<StageWork<cpu::Tensors<T>>*> work(static_cast<std::size_t>(d), nullptr);
  work[static_cast<std::size_t>(me)] = &rank;
  CpuExecutor<cpu::Tensors<T>> executor(s, work, o.executor);

  // A waiting process spins first where the processes of its node each have a core (a process
  // bound to one core by mpirun still has it to itself). Processes outnumbering the cores of
  // their one node share them: their CPU times are recorded and the replay runs on those cores.
  // Only for one replica: with R > 1 the other replicas' processes take cores from replica 0's,
  // which the replay of replica 0 alone does not see.
  const mpi::CoreSharing sharing = mpi::core_sharing(world);
  const auto spin = o.executor.spin(!sharing.node_oversubscribed);
  if (spin.count() > 0) tighten_timer_slack();  // the transport's waits nap between polls
  const int replay_cores = dp.replicas == 1 ? sharing.replay_cores : 0;
  mpi::MpiTransport<Envelope<cpu::Tensors<T>>, mpi::CpuTensorCodec<T>> transport(
      grid.pipeline, me, lower(s), o.executor.channel_capacity, spin, &message_name);

  const RankStages placed(s.placement);  // the stages each pipeline rank holds
  std::unique_ptr<mpi::GradientAllReduce<T>> reduce;
  RankHooks hooks;
  if (dp.replicas > 1) {
    // params_by_layer() lists the rank's stages in stage order, as RankStages does.
    const std::vector<int>& mine = placed.of(me);
    std::vector<typename mpi::GradientAllReduce<T>::StageGradients> stages;
    const auto by_stage = rank.params_by_layer();
    for (std::size_t k = 0; k < by_stage.size(); ++k) {
      typename mpi::GradientAllReduce<T>::StageGradients g;
      g.stage = mine.at(k);
      g.params = all_params(by_stage[k]);
      stages.push_back(std::move(g));
    }
    reduce =
        std::make_unique<mpi::GradientAllReduce<T>>(grid.data, me, dp.overlap, std::move(stages));
    if (dp.overlap) {
      hooks.stage_done = [&](int st) { reduce->stage_done(st); };
      hooks.poll = [&] { reduce->poll(); };
    }
  }

  std::unique_ptr<mpi::ProcessOptimizer<T>> optimizer;
  if (o.optimizer.enabled()) {
    optimizer = std::make_unique<mpi::ProcessOptimizer<T>>(
        o.optimizer, s.placement, me, rank.params_by_layer(), placed.of(me), grid.pipeline);
  }

  StepRecord last;
  RunOutput out;
  out.report = world.rank() == 0;
  using Clock = std::chrono::steady_clock;
  double step_start = 0;
  const RunTimings timings = run_steps(o.warmup, o.steps, o.progress && out.report, [&](int, bool) {
    rank.zero_grad();
    // One clock for the step: process 0's, read after a barrier, each process's origin
    // shifted onto it by the offset measured at start-up.
    const double root_origin = mpi::start_step_together(world.comm(), spin);
    const Clock::time_point origin = Clock::now();
    const double shift =
        std::chrono::duration<double>(origin.time_since_epoch()).count() + offset - root_origin;
    step_start = shift;
    const auto clock = [origin, shift] {
      return std::chrono::duration<double>(Clock::now() - origin).count() + shift;
    };
    if (reduce) reduce->set_clock(clock);
    transport.reset_peak();
    last = executor.run_rank_step(me, transport, origin, shift, hooks, replay_cores);
    if (reduce) last.trace.collectives = reduce->finish();
    if (optimizer) {
      last.trace.updates = optimizer->step(clock, replay_cores > 0);
      // The rank's CPU time holds its updates, as a rank thread's does (replay.cpp).
      if (replay_cores > 0)
        for (const UpdateEvent& u : last.trace.updates)
          last.trace.rank_cpu[static_cast<std::size_t>(me)] += u.cpu;
    }
    double loss = 0;
    for (auto [mb, l] : rank.losses) loss += static_cast<double>(l);
    const mpi::JobStep job = mpi::agree_on_step(world.comm(), last.trace, loss, n * dp.replicas);
    out.values.loss = job.loss;
    return StepOutcome{job.makespan, job.loss, ""};
  });

  // Process 0 gathers the last step's traces, peaks and replica 0's gradients.
  HeldMemory held;
  std::tie(held.params, held.grads) = rank.param_and_grad_bytes();
  held.optimizer = optimizer ? optimizer->state_bytes() : 0;
  held.activations = last.arenas.front().peak();
  held.comm = transport.peak_bytes();
  ProcessReport mine{
      .trace = last.trace,
      .held = held,
      .clock_offset = offset,
      .clock_offset_uncertainty = to_root.uncertainty,
      .step_start = step_start,
      .host = world.host(),
      .node_leader = world.node_leader(),
      .local_rank = world.local_rank(),
      .rank_cpu = replay_cores > 0 ? last.trace.rank_cpu.at(static_cast<std::size_t>(me)) : -1.0};
  const auto reports = mpi::gather_bytes(world.comm(), mine.encode());
  const auto grad_of = [](const auto& p) -> const auto& { return p.grad.data; };
  mpi::replica0_gradients(
      spec, s.placement, grid, world.comm(), static_cast<int>(plan.stages.size()),
      o.keep_gradients || o.check, out.report, rank.params_by_layer(), grad_of,
      [&](PartGradients& stats, const auto& p) {
        const std::vector<double> g(grad_of(p).begin(), grad_of(p).end());
        accumulate(stats, g.data(), g.size());
      },
      out.values);
  if (!out.report) return out;

  const std::vector<ProcessReport> procs = mpi::decode_reports(reports, d);
  const Trace replica0 = mpi::replica0_trace(procs, d, "cpu", replay_cores);
  std::vector<double> peaks;
  for (int p = 0; p < d; ++p) {
    peaks.push_back(procs[static_cast<std::size_t>(p)].held.activations);
  }

  nlohmann::json r = run_record({&spec, &s, &plan, o.seed, o.recompute, timings, &replica0,
                                 out.values, dp.replicas, dp.overlap},
                                "cpu");
  r["channel_capacity"] = o.executor.channel_capacity;
  r["activation_bytes"] = activation_bytes_json(peaks, predicted_peak_bytes(s, plan, o.recompute));
  const double samples = static_cast<double>(spec.microbatch_size);
  r["optimizer"] = optimizer_json(o.optimizer);
  r["provenance"]["cpu_gemm"] = cpu::gemm_library();
  std::vector<HeldMemory> held_by_rank;
  for (int p = 0; p < d; ++p) held_by_rank.push_back(procs[static_cast<std::size_t>(p)].held);
  r["memory"] = memory_json(
      held_by_rank,
      step_memory(spec, s, plan, {o.optimizer.kind, o.recompute, o.executor.channel_capacity}));
  r["launch"] = {{"transport", "mpi"},
                 {"processes", world.size()},
                 {"pipeline_ranks", d},
                 {"replicas", dp.replicas},
                 // How long process 0's waits spin before they nap (0: its node is
                 // oversubscribed).
                 {"spin_us", spin.count()},
                 {"mpi", mpi::mpi_library_json(mpi::process_environment())}};
  r["data_parallel"] = mpi::job_json(procs, s.placement, n, samples, dp.overlap);
  mpi::finish_job_record(out, std::move(r), spec, o, n, dp.replicas, procs, d, "cpu");
  return out;
}

}  // namespace

RunOutput run_cpu_mpi(const WorkloadSpec& spec, const RunOptions& o,
                      const DataParallelOptions& dp) {
  mpi::World& world = mpi::World::get();
  std::unique_ptr<Schedule> s;
  std::unique_ptr<PartitionPlan> plan;
  RunOptions ro = o;
  mpi::agree_to_start(world, [&] {
    mpi::require_process_count(
        world, o.file_schedule ? o.file_schedule->placement.ranks : o.schedule.devices,
        dp.replicas);
    check_step_counts(o.steps, o.warmup);
    require_cpu_workload(spec);
    s = std::make_unique<Schedule>(schedule_of(o));
    ro.executor.channel_capacity = validate_for_run(*s, o.executor.channel_capacity);
    plan = std::make_unique<PartitionPlan>(
        partition(spec, s->placement.stages_per_chain(), o.partition));
    mpi::require_messages_fit(*plan);
  });
  mpi::require_one_job(world, mpi::job_parts(*s, spec, *plan, ro, dp.replicas, dp.overlap));
  mpi::Grid grid(world, s->placement.ranks, dp.replicas);
  return spec.dtype == DType::kF64 ? run_typed<double>(spec, ro, dp, *s, *plan, world, grid)
                                   : run_typed<float>(spec, ro, dp, *s, *plan, world, grid);
}

}  // namespace ppbench
