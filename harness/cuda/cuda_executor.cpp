#include "harness/cuda/cuda_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/timer_slack.h"
#include "harness/cuda/gpu_transport.h"
#include "harness/cuda/graph_record.h"
#include "harness/cuda/nvtx.h"
#include "harness/cuda/p2p_deadlock_check.h"
#include "harness/cuda/step_graph.h"
#include "harness/cuda/trace_align.h"
#include "harness/executor/naps.h"
#include "harness/executor/rank_passes.h"
#include "schedules/stage_ends.h"
#include "workloads/cuda/check.h"

namespace ppbench::cuda {

namespace {

double host_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// How long a rank thread polls an event before it naps between looks. A step's tail (or a short
// step whole, as in the executor-overhead benchmark) is then seen within a look, where a sleep
// from the first look, 50 us plus Linux's default timer slack of 50 us, could end each wait
// about 100 us late. A GPU rank's thread has a core of its own on a GPU node.
constexpr std::chrono::microseconds kEventSpin{2000};

// Polls until `done` completes (true) or the watchdog's deadline passes (false), pausing as
// `pause` says: one SpinThenNap(kEventSpin) for a whole wait phase, so that a rank waiting on
// several transfers spins for kEventSpin in all, not afresh for each, and then naps of at most
// 50 us (Naps; the rank thread's timer slack is 1 us) leave the driver to the ranks still
// launching.
bool wait_for_event(cudaEvent_t done, Clock::time_point deadline, SpinThenNap& pause) {
  for (;;) {
    const cudaError_t q = cudaEventQuery(done);
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) CUDA_CHECK(q);
    const Clock::time_point now = Clock::now();
    if (now > deadline) return false;
    pause.pause(now);
  }
}

float elapsed_ms(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
  return ms;
}

// cudaEventElapsedTime on an event a graph node recorded: false (and the error cleared) where
// the driver refuses, or answers a time before the launch, so the step falls back to its total
// time instead of failing.
bool try_elapsed_ms(cudaEvent_t from, cudaEvent_t to, float& ms) {
  if (cudaEventElapsedTime(&ms, from, to) == cudaSuccess) return std::isfinite(ms) && ms >= 0;
  cudaGetLastError();
  return false;
}

}  // namespace

namespace {

NcclPlan plan_transfers(const Schedule& s, const Program& program,
                        const std::vector<cuda::Shape>& stage_output_shapes, cuda::DType dtype) {
  NcclPlanOptions o;
  o.dtype = plan_dtype(dtype);
  const std::size_t elem = cuda::dtype_size(dtype);
  for (int st = 0; st < s.stages(); ++st) {
    const cuda::Shape& shape = stage_output_shapes.at(static_cast<std::size_t>(st));
    // The last stage of a chain sends nothing; the plan still wants a positive size there.
    const std::int64_t n = shape.empty() ? 1 : cuda::shape_numel(shape);
    o.activation_bytes.push_back(static_cast<std::size_t>(n) * elem);
  }
  NcclPlan plan = build_nccl_plan(s, program, o);
  check_p2p_deadlock_free(plan);
  return plan;
}

}  // namespace

void check_transfer_plan(const Schedule& s, const std::vector<cuda::Shape>& stage_output_shapes,
                         cuda::DType dtype) {
  plan_transfers(s, lower(s), stage_output_shapes, dtype);
}

CudaExecutor::~CudaExecutor() {
  for (std::size_t r = 0; r < graphs_.size(); ++r) {
    try {
      devices_.rank(static_cast<int>(r)).make_current();
    } catch (...) {
    }
    graphs_[r].graph.reset();
  }
  // No rank's green context stays current on this thread (one thread at a time may hold it).
  try {
    devices_.release_current();
  } catch (...) {
  }
}

void CudaExecutor::set_stage_done(StageDone hook) {
  stage_done_ = std::move(hook);
  // Per rank, the plan step of each stage's last backward (B, I or W) action.
  stage_ends_.assign(plan_->ranks.size(), {});
  for (std::size_t r = 0; r < plan_->ranks.size(); ++r) {
    const auto& steps = plan_->ranks[r];
    stage_ends_[r] = stage_last_backwards(steps.size(), [&steps](std::size_t i) {
      return steps[i].is_group ? nullptr : &steps[i].action;
    });
  }
}

int CudaExecutor::hoisted_receives() const { return plan_->hoisted_receives; }
int CudaExecutor::deferred_sends() const { return plan_->deferred_sends; }

CudaExecutor::CudaExecutor(const Schedule& s, const GpuDevices& devices, std::vector<Work*> work,
                           std::vector<cuda::DeviceArena*> arenas, GpuTransport& transport,
                           std::vector<cuda::Shape> stage_output_shapes, cuda::DType dtype,
                           CudaExecutorOptions options)
    : schedule_(s),
      devices_(devices),
      program_(lower(s)),
      work_(std::move(work)),
      arenas_(std::move(arenas)),
      transport_(transport),
      shapes_(std::move(stage_output_shapes)),
      dtype_(dtype),
      options_(options),
      stages_(s.placement),
      watchdog_{options.watchdog_seconds},
      errors_([this] { transport_.abort(); }) {
  const int ranks = s.placement.ranks;
  if (devices.ranks() != ranks || static_cast<int>(work_.size()) != ranks ||
      static_cast<int>(arenas_.size()) != ranks)
    throw UsageError("the schedule has " + std::to_string(ranks) + " ranks but the GPU placement " +
                     std::to_string(devices.ranks()));
  plan_ = std::make_unique<NcclPlan>(plan_transfers(s, program_, shapes_, dtype_));
  transport_.connect(send_links(*plan_));
  for (int r = 0; r < ranks; ++r) {
    devices.rank(r).make_current();
    events_.push_back(std::make_unique<EventPool>());
  }
  devices.release_current();
  std::string why;
  if (options_.cuda_graph && !transport_.capturable(&why)) throw UsageError(why);
}

CudaStepRecord CudaExecutor::run_step(StepMode mode) {
  const int ranks = schedule_.placement.ranks;
  if (mode == StepMode::kGraph && !options_.cuda_graph)
    throw std::logic_error("run_step(kGraph) on an executor built without cuda_graph");
  if (mode == StepMode::kEager && captured_)
    throw std::logic_error("eager steps must come before the capture: its graphs own the events");
  std::vector<RankResult> results(static_cast<std::size_t>(ranks));
  errors_.clear();
  transport_.begin_step();
  if (mode == StepMode::kGraph) {
    if (!captured_) capture_all();
    std::vector<char> per_action(static_cast<std::size_t>(ranks), 1);
    std::vector<double> launch_to_done(static_cast<std::size_t>(ranks), 0);
    run_rank_threads(ranks, errors_, [&](int r) {
      bool timed = true;
      replay_rank(r, results[static_cast<std::size_t>(r)], timed,
                  launch_to_done[static_cast<std::size_t>(r)]);
      per_action[static_cast<std::size_t>(r)] = timed;
    });
    if (errors_.failed()) drain_after_failure();
    errors_.rethrow();
    GraphStepInfo info;
    info.per_action_timing =
        std::all_of(per_action.begin(), per_action.end(), [](char c) { return c != 0; });
    info.launch_to_done_s = launch_to_done;
    std::vector<double> launches;
    for (const RankResult& res : results) launches.push_back(res.start.host_seconds);
    info.step_seconds = graph_step_seconds(launches, launch_to_done);
    CudaStepRecord record = assemble(results, info.per_action_timing);
    for (int r = 0; r < ranks; ++r)
      record.device_peak_bytes[static_cast<std::size_t>(r)] =
          graphs_[static_cast<std::size_t>(r)].device_peak_bytes;
    record.graph = std::move(info);
    return record;
  }

  for (int r = 0; r < ranks; ++r) arenas_[static_cast<std::size_t>(r)]->reset_peak();
  run_rank_threads(ranks, errors_,
                   [&](int r) { run_rank(r, results[static_cast<std::size_t>(r)]); });
  const bool failed = errors_.failed();
  if (failed) drain_after_failure();
  // Tensors a receiver handed back after its sender's last reclaim: the ranks are joined, so
  // releasing them here cannot race an arena. After a failure only what has completed: a
  // transfer the drain left running keeps its tensor.
  for (int r = 0; r < ranks; ++r) {
    devices_.rank(r).make_current();
    try {
      transport_.reclaim(r, !failed);
    } catch (const std::exception& e) {
      errors_.fail(r, e);
    }
  }
  devices_.release_current();
  errors_.rethrow();
  return assemble(results, true);
}

void CudaExecutor::drain_after_failure() {
  // A failing rank stops walking its plan, not its streams, and the others stop where the
  // failure finds them; their enqueued kernels and copies end on their own (the transport was
  // aborted, so no transfer waits for ever). Bounded, as a kernel may still hang: what has not
  // drained by then is left, and the failure is reported either way.
  const auto until = Clock::now() + std::chrono::seconds(10);
  for (int r = 0; r < schedule_.placement.ranks; ++r) {
    const RankDevice& dev = devices_.rank(r);
    try {
      dev.make_current();
    } catch (...) {
      continue;
    }
    for (cudaStream_t s : {dev.compute, dev.comm})
      while (cudaStreamQuery(s) == cudaErrorNotReady && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  cudaGetLastError();  // the failure was reported by the call that failed
  try {
    devices_.release_current();
  } catch (...) {
  }
}

void CudaExecutor::capture_all() {
  const int ranks = schedule_.placement.ranks;
  graphs_.clear();
  graphs_.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) arenas_[static_cast<std::size_t>(r)]->reset_peak();
  run_rank_threads(ranks, errors_,
                   [&](int r) { capture_rank(r, graphs_[static_cast<std::size_t>(r)]); });
  if (errors_.failed()) {
    for (int r = 0; r < ranks; ++r) {
      devices_.rank(r).make_current();
      graphs_[static_cast<std::size_t>(r)].graph.reset();
    }
    devices_.release_current();
    graphs_.clear();
    errors_.rethrow("capturing the step as CUDA graphs: ");
  }
  capture_info_ = {};
  for (int r = 0; r < ranks; ++r) {
    RankGraph& g = graphs_[static_cast<std::size_t>(r)];
    g.arena_in_use = arenas_[static_cast<std::size_t>(r)]->in_use();
    g.device_peak_bytes = static_cast<double>(arenas_[static_cast<std::size_t>(r)]->peak());
    capture_info_.capture_seconds.push_back(g.capture_seconds);
    capture_info_.nodes.push_back(g.graph->nodes());
    capture_info_.event_record_nodes.push_back(g.graph->event_record_nodes());
  }
  captured_ = true;
}

CudaStepRecord CudaExecutor::assemble(const std::vector<RankResult>& results, bool with_trace) {
  const int ranks = schedule_.placement.ranks;
  CudaStepRecord record;
  if (with_trace) {
    std::vector<RankStart> starts;
    std::vector<GpuComputeTiming> compute;
    std::vector<GpuCommTiming> comm;
    std::vector<GpuUpdateTiming> updates;
    for (const RankResult& res : results) {
      starts.push_back(res.start);
      compute.insert(compute.end(), res.compute.begin(), res.compute.end());
      comm.insert(comm.end(), res.comm.begin(), res.comm.end());
      updates.insert(updates.end(), res.updates.begin(), res.updates.end());
    }
    record.trace = align_gpu_trace(ranks, starts, compute, comm, updates);
  } else {
    record.trace.source = "cuda";
    record.trace.time_unit = "s";
    record.trace.ranks = ranks;
  }
  // Memory samples at the end of the compute event that changed the kept bytes.
  std::vector<std::vector<const ComputeEvent*>> by_rank(static_cast<std::size_t>(ranks));
  for (const ComputeEvent& e : record.trace.compute)
    by_rank[static_cast<std::size_t>(e.rank)].push_back(&e);
  for (int r = 0; r < ranks; ++r) {
    record.arenas.emplace_back(r);
    if (with_trace) {
      for (auto [index, bytes] : results[static_cast<std::size_t>(r)].memory)
        record.arenas.back().set_live(by_rank[static_cast<std::size_t>(r)].at(index)->end, bytes);
      const auto& samples = record.arenas.back().samples();
      record.trace.memory.insert(record.trace.memory.end(), samples.begin(), samples.end());
    }
    // A rank of another process (run_rank_step) has no arena here.
    const cuda::DeviceArena* arena = arenas_[static_cast<std::size_t>(r)];
    record.device_peak_bytes.push_back(arena ? static_cast<double>(arena->peak()) : 0.0);
  }
  return record;
}

void CudaExecutor::replay_rank(int r, RankResult& out, bool& per_action, double& launch_to_done) {
  tighten_timer_slack();  // for wait_for_event's naps; this thread is the rank's for one step
  const RankDevice& dev = devices_.rank(r);
  RankGraph& g = graphs_[static_cast<std::size_t>(r)];
  const cuda::DeviceArena& arena = *arenas_[static_cast<std::size_t>(r)];
  try {
    dev.make_current();
    if (arena.in_use() != g.arena_in_use)
      throw std::logic_error("its activation arena holds " + std::to_string(arena.in_use()) +
                             " bytes but the graph was captured with " +
                             std::to_string(g.arena_in_use) +
                             ": something allocated or freed there since the capture, and the "
                             "graph's buffers could overlap it");
    NvtxRange range("rank " + std::to_string(r) + " step (CUDA graph)");
    CUDA_CHECK(cudaEventRecord(g.launched, dev.compute));
    CUDA_CHECK(cudaEventSynchronize(g.launched));
    out.start = {r, host_seconds()};
    g.graph->launch();
    CUDA_CHECK(cudaEventRecord(g.done, dev.compute));
    // The watchdog sees the whole step: a graph runs its transfers out of the host's sight.
    SpinThenNap pause(kEventSpin);
    if (!wait_for_event(g.done, watchdog_.deadline(), pause))
      return errors_.fail(StepFailure::kWatchdog, r,
                          watchdog_.message(r, "its step, launched as a CUDA graph",
                                            "a graph hides which transfer hangs: rerun without "
                                            "--cuda-graph to have it named"));
    launch_to_done = static_cast<double>(elapsed_ms(g.launched, g.done)) * 1e-3;
    per_action = true;
    float b = 0, e = 0;
    for (std::size_t i = 0; per_action && i < g.compute_events.size(); ++i) {
      per_action = try_elapsed_ms(g.launched, g.compute_events[i].first, b) &&
                   try_elapsed_ms(g.launched, g.compute_events[i].second, e);
      out.compute.push_back({r, b, e, g.compute_actions[i]});
    }
    for (std::size_t i = 0; per_action && i < g.comm.size(); ++i) {
      per_action = try_elapsed_ms(g.launched, g.comm_events[i].first, b) &&
                   try_elapsed_ms(g.launched, g.comm_events[i].second, e);
      out.comm.push_back(g.comm[i]);
      out.comm.back().start_ms = b;
      out.comm.back().end_ms = e;
    }
    for (std::size_t i = 0; per_action && i < g.update_events.size(); ++i) {
      per_action = try_elapsed_ms(g.launched, g.update_events[i].first, b) &&
                   try_elapsed_ms(g.launched, g.update_events[i].second, e);
      out.updates.push_back({r, b, e, g.update_stages[i]});
    }
    if (!per_action) {
      out.compute.clear();
      out.comm.clear();
      out.updates.clear();
    }
    out.memory = g.memory;
  } catch (const std::exception& e) {
    errors_.fail(r, e);
  }
}

bool CudaExecutor::walk_plan(int r, bool capturing, RankWalk& walk) {
  const RankDevice& dev = devices_.rank(r);
  Work& work = *work_[static_cast<std::size_t>(r)];
  cuda::DeviceArena& arena = *arenas_[static_cast<std::size_t>(r)];
  EventPool& events = *events_[static_cast<std::size_t>(r)];
  RankPasses<cuda::DTensor> passes(work, schedule_.placement);
  auto run_task = [&](const Task& t) {
    arena.set_scope("rank " + std::to_string(r) + " " + to_string(t));
    passes.run(t);
  };
  RankIo io;
  io.rank = r;
  io.compute = dev.compute;
  io.comm = dev.comm;
  io.arena = &arena;
  io.events = &events;
  io.timings = &walk.timings;
  io.pending = &walk.pending;
  io.dtype = dtype_;
  io.shape_of = [this](const Task& t) {
    return shapes_.at(static_cast<std::size_t>(t.op == Op::F ? t.stage : t.stage - 1));
  };
  io.capturing = capturing;

  // Stages whose last backward has been enqueued, their update not yet: it waits for the groups
  // that send that backward's outputs, so that the sends are not queued behind the update's
  // kernels (the rank upstream waits for the gradient, not for this rank's update), but not for
  // the receives of the same group (the next input). Enqueued by the transport between a
  // group's sends and its receives (RankIo::after_sends), before the next compute, or at the
  // end of the plan.
  std::vector<int> due;
  auto update_due = [&] {
    for (int stage : due) {
      NvtxRange update_range("update stage " + std::to_string(stage));
      cudaEvent_t ub = events.next(), ue = events.next();
      record_timing_event(ub, dev.compute, capturing);
      const bool ran = stage_done_(r, stage);
      record_timing_event(ue, dev.compute, capturing);
      if (ran) walk.update_events.emplace_back(ub, ue), walk.update_stages.push_back(stage);
    }
    due.clear();
  };
  io.after_sends = update_due;
  const auto& steps = plan_->ranks[static_cast<std::size_t>(r)];
  for (std::size_t si = 0; si < steps.size(); ++si) {
    const P2PStep& step = steps[si];
    if (!step.is_group) update_due();
    // Inside a capture nothing has run: sent tensors are all released after it.
    if (!capturing) transport_.reclaim(r, false);
    if (!step.is_group) {
      NvtxRange range(to_string(step.action));
      cudaEvent_t b = events.next(), e = events.next();
      record_timing_event(b, dev.compute, capturing);
      run_task(step.action.task);
      if (step.action.paired()) {
        // Between the halves the new forward's activations and the backward's micro-batch's are
        // held at once: a sample of its own, at the pair's end (no event times the middle).
        walk.memory.emplace_back(walk.compute_actions.size(), stages_.saved_bytes(r, work));
        run_task(step.action.partner);
      }
      record_timing_event(e, dev.compute, capturing);
      walk.compute_events.emplace_back(b, e);
      walk.compute_actions.push_back(step.action);
      walk.memory.emplace_back(walk.compute_actions.size() - 1, stages_.saved_bytes(r, work));
      if (stage_done_)
        for (const auto& [at, stage] : stage_ends_[static_cast<std::size_t>(r)])
          if (at == si) due.push_back(stage);
      continue;
    }
    std::vector<cuda::DTensor> tensors(step.ops.size());
    for (std::size_t i = 0; i < step.ops.size(); ++i)
      if (step.ops[i].dir == P2POp::Dir::Send) {
        tensors[i] = passes.take(message_name(step.ops[i].payload));
        if (tensors[i].empty())
          throw std::logic_error(to_string(step.ops[i]) + ": nothing was produced to send");
      }
    io.deadline = watchdog_.deadline();
    try {
      transport_.run_group(io, step.ops, tensors);
    } catch (const TransportAborted&) {
      return false;
    } catch (const TransportTimeout& t) {
      const std::vector<Instr>& instrs = program_.ranks[static_cast<std::size_t>(r)];
      const std::string why = t.what();
      errors_.fail(StepFailure::kWatchdog, r,
                   watchdog_.message(r, t.instr < instrs.size() ? to_string(instrs[t.instr]) : "?",
                                     why.find("rank") == std::string::npos
                                         ? why + ", peer rank " + std::to_string(t.peer)
                                         : why));
      return false;
    }
    for (std::size_t i = 0; i < step.ops.size(); ++i)
      if (step.ops[i].dir == P2POp::Dir::Recv)
        passes.put(message_name(step.ops[i].payload), std::move(tensors[i]));
  }
  update_due();
  return true;
}

void CudaExecutor::run_rank(int r, RankResult& out) {
  tighten_timer_slack();  // for wait_for_event's naps; this thread is the rank's for one step
  const RankDevice& dev = devices_.rank(r);
  EventPool& events = *events_[static_cast<std::size_t>(r)];
  dev.make_current();
  events.reset();
  cudaEvent_t start = events.next();
  CUDA_CHECK(cudaEventRecord(start, dev.compute));
  CUDA_CHECK(cudaEventSynchronize(start));
  out.start = {r, host_seconds()};
  RankWalk walk;
  if (!walk_plan(r, false, walk)) return;

  // The end of the step: every transfer must complete within the watchdog's limit; the first
  // that does not names the instruction the rank is stuck at.
  const std::vector<Instr>& instrs = program_.ranks[static_cast<std::size_t>(r)];
  const auto deadline = watchdog_.deadline();
  SpinThenNap pause(kEventSpin);
  for (const PendingTransfer& t : walk.pending) {
    if (!wait_for_event(t.done, deadline, pause))
      return errors_.fail(
          StepFailure::kWatchdog, r,
          watchdog_.message(r, t.instr < instrs.size() ? to_string(instrs[t.instr]) : "?",
                            std::string(t.send ? "the send to" : "the receive from") + " rank " +
                                std::to_string(t.peer) + " never completes"));
  }
  CUDA_CHECK(cudaStreamSynchronize(dev.compute));
  CUDA_CHECK(cudaStreamSynchronize(dev.comm));
  transport_.reclaim(r, true);

  for (std::size_t i = 0; i < walk.compute_events.size(); ++i)
    out.compute.push_back({r, elapsed_ms(start, walk.compute_events[i].first),
                           elapsed_ms(start, walk.compute_events[i].second),
                           walk.compute_actions[i]});
  for (const TransferTiming& t : walk.timings)
    out.comm.push_back(
        {t.src, t.dst, t.timed_on, elapsed_ms(start, t.begin), elapsed_ms(start, t.end), t.task});
  for (std::size_t i = 0; i < walk.update_events.size(); ++i)
    out.updates.push_back({r, elapsed_ms(start, walk.update_events[i].first),
                           elapsed_ms(start, walk.update_events[i].second), walk.update_stages[i]});
  out.memory = std::move(walk.memory);
}

void CudaExecutor::capture_rank(int r, RankGraph& g) {
  const RankDevice& dev = devices_.rank(r);
  EventPool& events = *events_[static_cast<std::size_t>(r)];
  dev.make_current();
  events.reset();
  // Events are created before the capture (creating one is not a call to make while a stream
  // of this thread is captured): fork and join, two per compute, and a bound on what a
  // transport takes per group (the NCCL transport takes four).
  std::size_t needed = 2;
  for (const P2PStep& step : plan_->ranks[static_cast<std::size_t>(r)])
    needed += step.is_group ? 8 : 2;
  if (stage_done_) needed += 2 * stage_ends_[static_cast<std::size_t>(r)].size();
  events.reserve(needed);
  const auto began = Clock::now();
  g.graph = std::make_unique<StepGraph>();
  g.graph->begin(dev.compute, dev.comm, events.next(), events.next());
  RankWalk walk;
  bool walked = false;
  try {
    walked = walk_plan(r, true, walk);
  } catch (...) {
    g.graph->abandon();
    throw;
  }
  if (!walked) {
    g.graph->abandon();
    return;
  }
  g.graph->end();
  g.capture_seconds = std::chrono::duration<double>(Clock::now() - began).count();
  transport_.release_sent(r);
  g.compute_events = std::move(walk.compute_events);
  g.compute_actions = std::move(walk.compute_actions);
  g.memory = std::move(walk.memory);
  g.update_events = std::move(walk.update_events);
  g.update_stages = std::move(walk.update_stages);
  for (const TransferTiming& t : walk.timings) {
    g.comm.push_back({t.src, t.dst, t.timed_on, 0, 0, t.task});
    g.comm_events.emplace_back(t.begin, t.end);
  }
  // Taken after the capture: never recorded by its graph, so plain events around launches.
  g.launched = events.next();
  g.done = events.next();
}

}  // namespace ppbench::cuda
