#!/usr/bin/env python3
"""ppbench's CPU pipeline against PyTorch's own pipelining on the same machine, as whole processes.

Both run the same MLP (ppbench's `--workload mlp`: L blocks of Linear + GeLU(tanh) of width W,
then a Linear classifier with softmax cross-entropy), split into D = 2 stages on 2 ranks with
one thread each (PyTorch: two processes over gloo, torch.set_num_threads(1); ppbench: one
thread per rank, its matrix products single-threaded), N micro-batches of b samples, float32,
for each schedule both implement. A step is forward + backward of N micro-batches (no optimizer
step: ppbench runs with `--optimizer none`). The record names the matrix-product library of each
side (ppbench's `provenance.cpu_gemm`, PyTorch's BLAS).

Per schedule it reports:
  - ppbench's reported step time (median compute makespan) and its wall time per step,
  - ppbench's whole-process time per step: (T(S steps) - T(1 step)) / (S - 1), the median over
    --repeats pairs run back to back, so start-up, model building and the first step cancel,
  - PyTorch's time per step measured the same two ways (in-process median, and whole processes),
and the ratios ppbench / PyTorch of the whole-process times (the user's experience) and of the
in-process wall times per step (steadier on a shared machine).

Not a test (timings belong here, not in ctest). Needs PyTorch (any build; the CUDA wheels work on
a CPU-only machine) in the Python that runs it:

    python3 benchmarks/torch_pipelining_cpu.py --ppbench build/ppbench \
        --out results/perf/torch_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from results_io import atomic_write, load_average  # noqa: E402
from script_cli import (InputError, OneLineParser, ScriptError, last_line,  # noqa: E402
                        number, output_path, require_module, run)

# ppbench name -> PyTorch schedule class, stages per rank.
SCHEDULES = {
    "gpipe": ("ScheduleGPipe", 1),
    "1f1b": ("Schedule1F1B", 1),
    "interleaved-1f1b": ("ScheduleInterleaved1F1B", 2),
    "zb-v": ("ScheduleZBVZeroBubble", 2),
    "dualpipev": ("ScheduleDualPipeV", 2),
}


def torch_worker(rank: int, world: int, args: argparse.Namespace, out_path: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining

    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    cls_name, per_rank = SCHEDULES[args.schedule]
    stages_total = world * per_rank
    layers = args.layers
    # ppbench's partition: blocks 0..L-2 and the head (L layers), cut into contiguous stages.

    def block(i: int) -> torch.nn.Module:
        if i == layers - 1:
            return torch.nn.Linear(args.width, args.classes)
        return torch.nn.Sequential(torch.nn.Linear(args.width, args.width),
                                   torch.nn.GELU(approximate="tanh"))
    counts = [layers // stages_total + (1 if s < layers % stages_total else 0)
              for s in range(stages_total)]
    starts = [sum(counts[:s]) for s in range(stages_total)]
    if per_rank == 1:
        my_stages = [rank]
    elif cls_name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV"):
        my_stages = [rank, stages_total - 1 - rank]  # V shape
    else:
        my_stages = [rank + c * world for c in range(per_rank)]  # interleaved
    torch.manual_seed(1234)
    stages = []
    for s in my_stages:
        mod = torch.nn.Sequential(*[block(i) for i in range(starts[s], starts[s] + counts[s])])
        stages.append(pipelining.PipelineStage(mod, s, stages_total, torch.device("cpu")))

    def loss_fn(out, target):
        return torch.nn.functional.cross_entropy(out, target)

    cls = getattr(pipelining, cls_name)
    if per_rank == 1:
        schedule = cls(stages[0], n_microbatches=args.microbatches, loss_fn=loss_fn)
    else:
        schedule = cls(stages, n_microbatches=args.microbatches, loss_fn=loss_fn)
    batch = args.microbatches * args.microbatch_size
    x = torch.randn(batch, args.width)
    y = torch.randint(0, args.classes, (batch,))
    holds_first = 0 in my_stages
    holds_last = stages_total - 1 in my_stages
    times = []
    for k in range(args.warmup + args.steps):
        dist.barrier()
        t0 = time.perf_counter()
        kwargs = {}
        if holds_last:
            kwargs["target"] = y
        if holds_first:
            schedule.step(x, **kwargs)
        else:
            schedule.step(**kwargs)
        times.append(time.perf_counter() - t0)
    dist.barrier()
    if rank == 0:
        Path(out_path).write_text(json.dumps({"step_s": times[args.warmup:]}))
    dist.destroy_process_group()


def torch_run(args: argparse.Namespace, steps: int) -> tuple[float, list[float]]:
    """Whole-process seconds of a 2-rank PyTorch run of `steps` measured steps (no warm-up)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "steps.json"
        cmd = [sys.executable, __file__, "--torch-worker", "--schedule", args.schedule,
               "--layers", str(args.layers), "--width", str(args.width),
               "--microbatch-size", str(args.microbatch_size),
               "--microbatches", str(args.microbatches), "--steps", str(steps),
               "--warmup", "0", "--worker-out", str(out)]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "MASTER_PORT": str(29500 + (os.getpid() % 1000))}
        t0 = time.perf_counter()
        checked_run(cmd, "PyTorch's run", env=env)
        return time.perf_counter() - t0, json.loads(out.read_text())["step_s"]


def ppbench_run(args: argparse.Namespace, steps: int) -> tuple[float, dict]:
    cmd = [args.ppbench, "run", "--backend", "cpu", "--workload", "mlp", "--layers",
           str(args.layers), "--width", str(args.width), "--input-dim", str(args.width),
           "--classes", str(args.classes), "--microbatch-size", str(args.microbatch_size),
           "--dtype", "f32", "--schedule", args.schedule, "--devices", "2",
           "--microbatches", str(args.microbatches), "--steps", str(steps), "--warmup", "0",
           "--optimizer", "none", "--format", "json"]
    if SCHEDULES[args.schedule][1] == 2 and args.schedule == "interleaved-1f1b":
        cmd += ["--chunks", "2"]
    t0 = time.perf_counter()
    r = checked_run(cmd, f"ppbench's run of {args.schedule}")
    try:
        record = json.loads(r.stdout)
    except ValueError:
        raise ScriptError(f"{args.ppbench} run printed no JSON record") from None
    return time.perf_counter() - t0, record


def checked_run(cmd: list[str], what: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """cmd run to its end; ScriptError (exit 1: the comparison failed) naming what failed and
    its last line on stderr where it exits non-zero, instead of CalledProcessError's traceback."""
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise ScriptError(f"{what} exited {r.returncode}: {last_line(r.stderr)}")
    return r


def per_step(t_long: list[float], t_short: list[float], steps: int) -> float:
    """Median over the repeats of (T(long) - T(short)) / steps, each pair run back to back: the
    minimum of each side taken apart let one slow start-up swing the estimate by 2x on a shared
    machine."""
    return statistics.median((lg - sh) / steps for lg, sh in zip(t_long, t_short))


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="torch_pipelining_cpu", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ppbench", default="build/ppbench")
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    ap.add_argument("--layers", type=number(int, 2, 1024), default=8)
    ap.add_argument("--width", type=number(int, 1, 65536), default=1024)
    ap.add_argument("--classes", type=number(int, 2, 65536), default=10)
    ap.add_argument("--microbatch-size", type=number(int, 1, 65536), default=64)
    ap.add_argument("--microbatches", type=number(int, 1, 4096), default=8)
    ap.add_argument("--steps", type=number(int, 2, 10000), default=10,
                    help="the long runs' steps (the short: 1)")
    ap.add_argument("--repeats", type=number(int, 1, 1000), default=5,
                    help="whole-process run pairs per point (median)")
    ap.add_argument("--out", help="write the JSON here")
    # Internal: one rank pair of PyTorch.
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--schedule", help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    unknown = sorted(set(args.schedules.split(",")) - set(SCHEDULES))
    if unknown:
        ap.error(f"--schedules: {', '.join(unknown)} (allowed: {', '.join(SCHEDULES)})")
    if args.out:
        output_path(args.out, "--out")
    if args.torch_worker:
        mp = require_module("torch.multiprocessing", "the PyTorch worker")
        mp.spawn(torch_worker, args=(2, args, args.worker_out), nprocs=2, join=True)
        return 0

    if not os.path.isfile(args.ppbench) or not os.access(args.ppbench, os.X_OK):
        raise InputError(f"--ppbench {args.ppbench}: not an executable ppbench (build it first)")
    torch = require_module("torch", "the comparison with PyTorch's pipelining")  # early: exit 3
    rows = []
    for name in args.schedules.split(","):
        args.schedule = name
        short_pp, long_pp, short_t, long_t = [], [], [], []
        record = None
        torch_steps: list[float] = []
        for _ in range(args.repeats):
            short_pp.append(ppbench_run(args, 1)[0])
            t, record = ppbench_run(args, args.steps)
            long_pp.append(t)
            short_t.append(torch_run(args, 1)[0])
            t, torch_steps = torch_run(args, args.steps)
            long_t.append(t)
        pp_process = per_step(long_pp, short_pp, args.steps - 1)
        t_process = per_step(long_t, short_t, args.steps - 1)
        row = {
            "schedule": name,
            "ppbench_reported_step_s": record["step_time_s"],
            "ppbench_wall_step_s": record["step_time"]["wall_s"]["median"],
            "ppbench_process_step_s": pp_process,
            "torch_in_process_step_s": statistics.median(torch_steps),
            "torch_process_step_s": t_process,
            "process_ratio": pp_process / t_process,
            "in_process_ratio": (record["step_time"]["wall_s"]["median"]
                                 / statistics.median(torch_steps)),
            "reported_vs_process": record["step_time_s"] / pp_process,
        }
        rows.append(row)
        print(f"{name:18} ppbench reported {1e3 * row['ppbench_reported_step_s']:8.1f} ms, "
              f"wall {1e3 * row['ppbench_wall_step_s']:8.1f} ms, "
              f"process {1e3 * pp_process:8.1f} ms | "
              f"torch in-process {1e3 * row['torch_in_process_step_s']:8.1f} ms, process "
              f"{1e3 * t_process:8.1f} ms | ppbench/torch process {row['process_ratio']:.2f}, "
              f"in-process {row['in_process_ratio']:.2f}", flush=True)
    result = {
        "config": {k: getattr(args, k) for k in ("layers", "width", "classes", "microbatch_size",
                                                 "microbatches", "steps", "repeats")},
        "machine": {"host": platform.node(), "cpu": record["provenance"]["cpu"] if record else None,
                    "cores": os.cpu_count(), "load_average": load_average()},
        "torch": torch.__version__,
        "torch_blas": torch_blas(),
        "ppbench_commit": record["provenance"]["git_commit"] if record else None,
        "ppbench_cpu_gemm": record["provenance"].get("cpu_gemm") if record else None,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    if args.out:
        atomic_write(Path(args.out), json.dumps(result, indent=1) + "\n")
    worst = max(r["process_ratio"] for r in rows)
    worst_in = max(r["in_process_ratio"] for r in rows)
    print(f"torch-cpu: worst ppbench/PyTorch step time {worst:.2f} whole-process, {worst_in:.2f} "
          f"in-process (ppbench's wall per step against PyTorch's; goal <= 1.00) over "
          f"{len(rows)} schedules")
    return 0


def torch_blas():
    """The BLAS PyTorch was built with, from its build configuration (e.g. "BLAS_INFO=mkl")."""
    import torch
    for line in torch.__config__.show().splitlines():
        for item in line.replace(",", " ").split():
            if item.startswith("BLAS_INFO="):
                return item.split("=", 1)[1]
    return None


if __name__ == "__main__":
    sys.exit(run("torch_pipelining_cpu", main))
