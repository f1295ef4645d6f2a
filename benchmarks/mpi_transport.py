#!/usr/bin/env python3
"""The multi-process run's transport against the in-process mailboxes, measured on this machine.

    benchmarks/mpi_transport.py [--ppbench build/ppbench] [--out FILE] [--steps 20] [--warmup 3]
                                [--repeats 3] [--only latency|fidelity]

Both parts run the same `ppbench run` twice per repeat: once with its ranks as threads of one
process (the mailboxes of harness/executor/mailbox.h) and once as `mpirun -np 2` processes (MPI
point-to-point, harness/mpi/mpi_transport.h). Threads and processes alternate, so that a change
in the machine's load falls on both alike.

  latency   per-message hand-over time at three activation sizes: an MLP of two layers (one per
            rank) of width 8 with micro-batches of 2, 2048 and 131072 samples, f32, so that each
            activation (and each gradient coming back) is 64 B, 64 KiB and 4 MiB.
            1F1B at D = 2, N = 16: 32 messages a step. Two views of the same step:
              - hand-over: the median duration of the trace's comm events (--trace-out, the last
                step): from when both sides were ready to when the receiver held the tensor, so
                it includes encoding and copying the tensor, not the time a rank waits for its
                peer's compute;
              - makespan per message: the median makespan over the measured steps divided by
                the messages of a step. At width 8 the compute is a few microseconds, so this
                is what a message costs the step; at the larger sizes compute takes over.
  fidelity  measured bubble fraction minus the replay's predicted one (the record's "predicted",
            the simulator fed the step's measured per-op costs and mean hand-over) at D = 2 on an
            MLP of 8 layers of width 512, threads beside processes, in two cases:
              - compute-bound: micro-batch 64, N = 8, for 1f1b, zb-h1 and gpipe (a stage's F is
                a few milliseconds, far above a hand-over);
              - hand-over-bound: micro-batch 8, N = 32, for 1f1b, interleaved-1f1b, zb-h1, zb-v
                and dualpipev (16 KiB messages between actions of about 0.1-0.3 ms, so that what
                a rank spends on each message shows).
            The project's goal is a gap within 0.03.

Writes one JSON record (atomically): default results/perf/mpi/<commit>.json, with provenance
(commit, host, CPU model, cores, load average before and after, OpenMPI version, date) and every
run's figures, and prints a table. mpirun is started with OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) so
that it runs as root (CI containers).

Exit codes: 0 done; 2 a bad option or no ppbench at --ppbench; 3 no mpirun on PATH or a ppbench
built without MPI; 1 a run failed (its command and ppbench's last line are printed).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from mpi_bench import MPI_ENV, Failure, non_negative, positive, record_benchmark  # noqa: E402
from results_io import load_average  # noqa: E402
from script_cli import OneLineParser, last_line, run  # noqa: E402

PIPELINE_RANKS = 2
BYTES_PER_FLOAT = 4  # f32
# (width, micro-batch size): activations of width x b floats = 64 B, 64 KiB, 4 MiB. The width
# stays 8 and the micro-batch grows: a layer's FLOPs per byte handed over are about its width, so
# this keeps compute smallest beside the messages (at width 4096 a 4 MiB step took 6 s here).
SIZES = ((8, 2), (8, 2048), (8, 131072))
LATENCY_SCHEDULE, LATENCY_MICROBATCHES = "1f1b", 16
# (case, micro-batch size, micro-batches, schedules) on an MLP of 8 layers of width 512.
FIDELITY_CASES = (
    ("compute-bound", 64, 8, ("1f1b", "zb-h1", "gpipe")),
    ("hand-over-bound", 8, 32, ("1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipev")),
)
FIDELITY_MODEL = ["--workload", "mlp", "--layers", "8", "--width", "512"]
CHUNKS = {"interleaved-1f1b": 2}  # model chunks per rank, said explicitly
FIDELITY_GOAL = 0.03
LAUNCHERS = ("threads", "mpirun")
RUN_TIMEOUT = 600


def run_ppbench(ppbench: str, mpirun: str, launcher: str, args: list[str],
                trace: Path | None = None) -> tuple[dict, dict | None]:
    """One `ppbench run` in threads or in PIPELINE_RANKS processes: (record, trace or None)."""
    cmd = [ppbench, "run", *args, "--pp", str(PIPELINE_RANKS), "--format", "json"]
    if trace is not None:
        cmd += ["--trace-out", str(trace)]
    if launcher == "mpirun":
        cmd = [mpirun, "-np", str(PIPELINE_RANKS), *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                       env=dict(os.environ, **MPI_ENV))
    if r.returncode != 0:
        raise Failure(f"'{' '.join(cmd)}' exited {r.returncode}: {last_line(r.stderr)}")
    record = json.loads(r.stdout)
    if launcher == "mpirun" and (record.get("launch") or {}).get("transport") != "mpi":
        raise Failure(f"'{' '.join(cmd)}': the record does not say it ran over MPI "
                      f"(launch: {record.get('launch')})")
    return record, json.loads(trace.read_text()) if trace is not None else None


def step_times_s(record: dict, what: str) -> list[float]:
    """The makespans of a run's measured steps. A record without them (a ppbench older than the
    field, or one that measured no step) is a failed run, said in one line: the median over none
    would otherwise end the script in a traceback, after minutes of runs."""
    steps = record.get("step_times_s")
    if not isinstance(steps, list) or not steps or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) for t in steps):
        raise Failure(f"{what}: its record has no step_times_s (the measured steps' makespans, "
                      f"a non-empty list of seconds), got {steps!r}")
    return steps


def comm_durations_s(trace: dict) -> list[float]:
    """Every hand-over of the trace's step, in seconds (Chrome trace events are in µs)."""
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    return [e["dur"] * 1e-6 for e in events if isinstance(e, dict) and e.get("cat") == "comm"]


def quantiles(values: list[float]) -> dict:
    values = sorted(values)
    if not values:
        return {"median": None, "p10": None, "p90": None, "count": 0}

    def at(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]
    return {"median": statistics.median(values), "mean": statistics.fmean(values),
            "p10": at(0.1), "p90": at(0.9), "count": len(values)}


def measure_latency(ppbench: str, mpirun: str, steps: int, warmup: int, repeats: int,
                    tmp: Path) -> list[dict]:
    rows = []
    for width, b in SIZES:
        args = ["--workload", "mlp", "--layers", "2", "--width", str(width), "-b", str(b),
                "--dtype", "f32", "--schedule", LATENCY_SCHEDULE,
                "-n", str(LATENCY_MICROBATCHES), "--steps", str(steps), "--warmup", str(warmup)]
        found: dict[str, dict] = {
            launcher: {"handovers_s": [], "makespans_s": [], "messages": None, "load_average": []}
            for launcher in LAUNCHERS}
        for rep in range(repeats):
            for launcher in LAUNCHERS:
                t0 = time.monotonic()
                record, trace = run_ppbench(ppbench, mpirun, launcher, args,
                                            tmp / f"trace-{launcher}.json")
                what = f"ppbench run {' '.join(args)} ({launcher})"
                durations = comm_durations_s(trace)
                if not durations:
                    raise Failure(f"{what}: its trace has no hand-overs (comm events) to time")
                f = found[launcher]
                f["handovers_s"] += durations
                f["makespans_s"] += step_times_s(record, what)
                f["messages"] = len(durations)
                f["ppbench_commit"] = record["provenance"].get("git_commit")
                f["load_average"].append(load_average(2))
                print(f"  width {width:>4} b={b:<3} {launcher:<7} repeat {rep + 1}: hand-over "
                      f"median {statistics.median(durations) * 1e6:9.1f} us, makespan "
                      f"{record['step_time_s'] * 1e3:8.3f} ms ({time.monotonic() - t0:.1f} s)",
                      flush=True)
        row = {"width": width, "microbatch_size": b,
               "message_bytes": width * b * BYTES_PER_FLOAT, "command": "ppbench run " +
               " ".join(args) + f" --pp {PIPELINE_RANKS}"}
        for launcher in LAUNCHERS:
            f = found[launcher]
            makespan = statistics.median(f["makespans_s"])
            row[launcher] = {
                "handover_s": quantiles(f["handovers_s"]),
                "makespan_s": {"median": makespan, "min": min(f["makespans_s"]),
                               "max": max(f["makespans_s"]), "steps": len(f["makespans_s"])},
                "messages_per_step": f["messages"],
                "makespan_per_message_s": makespan / f["messages"] if f["messages"] else None,
                "load_average": f["load_average"], "ppbench_commit": f.get("ppbench_commit")}
        t, m = row["threads"], row["mpirun"]
        row["mpi_minus_threads_handover_s"] = m["handover_s"]["median"] - t["handover_s"]["median"]
        row["mpi_over_threads_makespan"] = m["makespan_s"]["median"] / t["makespan_s"]["median"]
        rows.append(row)
    return rows


def measure_fidelity(ppbench: str, mpirun: str, steps: int, warmup: int,
                     repeats: int) -> list[dict]:
    rows = []
    for case, b, microbatches, schedule in ((c, b, n, s) for c, b, n, schedules in FIDELITY_CASES
                                            for s in schedules):
        args = [*FIDELITY_MODEL, "-b", str(b), "--dtype", "f32", "--schedule", schedule,
                "-n", str(microbatches), "--steps", str(steps), "--warmup", str(warmup)]
        if schedule in CHUNKS:
            args += ["--chunks", str(CHUNKS[schedule])]
        row: dict = {"case": case, "schedule": schedule, "microbatch_size": b,
                     "microbatches": microbatches,
                     "command": "ppbench run " + " ".join(args) + f" --pp {PIPELINE_RANKS}"}
        runs: dict[str, list[dict]] = {launcher: [] for launcher in LAUNCHERS}
        for rep in range(repeats):
            for launcher in LAUNCHERS:
                record, _ = run_ppbench(ppbench, mpirun, launcher, args)
                measured = record["measured"]["bubble_fraction"]
                predicted = record["predicted"]["bubble_fraction"]
                runs[launcher].append({"measured_bubble_fraction": measured,
                                       "predicted_bubble_fraction": predicted,
                                       "gap": measured - predicted,
                                       "step_time_s": record["step_time_s"],
                                       "load_average": load_average(2)})
                print(f"  {case} {schedule:<16} {launcher:<7} repeat {rep + 1}: measured "
                      f"{measured:.4f}, "
                      f"predicted {predicted:.4f}, gap {measured - predicted:+.4f}, step "
                      f"{record['step_time_s'] * 1e3:.1f} ms", flush=True)
        for launcher in LAUNCHERS:
            gaps = [r["gap"] for r in runs[launcher]]
            row[launcher] = {"runs": runs[launcher], "median_gap": statistics.median(gaps),
                             "max_abs_gap": max(abs(g) for g in gaps),
                             "within_goal": all(abs(g) <= FIDELITY_GOAL for g in gaps)}
        rows.append(row)
    return rows


def print_tables(result: dict) -> None:
    if result.get("latency"):
        print("\nper-message hand-over, median (p90) of the trace's comm events, and the median "
              "makespan per message, in us:")
        print(f"{'bytes':>9} | {'threads':>17} {'mpirun':>17} {'mpi-thr':>9} | "
              f"{'thr mksp/msg':>12} {'mpi mksp/msg':>12}")

        def us(q: dict) -> str:
            return f"{q['median'] * 1e6:.1f} ({q['p90'] * 1e6:.1f})"
        for r in result["latency"]:
            t, m = r["threads"], r["mpirun"]
            print(f"{r['message_bytes']:>9} | {us(t['handover_s']):>17} "
                  f"{us(m['handover_s']):>17} "
                  f"{r['mpi_minus_threads_handover_s'] * 1e6:9.1f} | "
                  f"{t['makespan_per_message_s'] * 1e6:12.1f} "
                  f"{m['makespan_per_message_s'] * 1e6:12.1f}")
    if result.get("fidelity"):
        print(f"\nbubble gap, measured - predicted (median over repeats; goal |gap| <= "
              f"{FIDELITY_GOAL}):")
        for r in result["fidelity"]:
            print(f"  {r['case']:<15} {r['schedule']:<16} threads "
                  f"{r['threads']['median_gap']:+.4f}   mpirun {r['mpirun']['median_gap']:+.4f}")


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="mpi_transport", description=__doc__.splitlines()[0])
    ap.add_argument("--ppbench", default=str(ROOT / "build" / "ppbench"))
    ap.add_argument("--out", type=Path, help="the JSON record (default: "
                    "results/perf/mpi/<commit>.json)")
    ap.add_argument("--steps", type=positive, default=20, help="measured steps per run")
    ap.add_argument("--warmup", type=non_negative, default=3, help="unmeasured steps first")
    ap.add_argument("--repeats", type=positive, default=3,
                    help="runs of each point per launcher (threads and mpirun alternate)")
    ap.add_argument("--only", choices=("latency", "fidelity"), help="run one part only")
    a = ap.parse_args(argv)
    result: dict = {"benchmark": "mpi_transport", "steps": a.steps, "warmup": a.warmup,
                    "repeats": a.repeats, "pipeline_ranks": PIPELINE_RANKS}

    def measure(mpirun: str, result: dict) -> None:
        with tempfile.TemporaryDirectory(prefix="mpi_transport-") as tmp:
            if a.only in (None, "latency"):
                print("latency: 1f1b, D = 2, N = 16, two-layer MLP of width 8", flush=True)
                result["latency"] = measure_latency(a.ppbench, mpirun, a.steps, a.warmup,
                                                    a.repeats, Path(tmp))
            if a.only in (None, "fidelity"):
                print("fidelity: D = 2, N = 8, MLP 8 x 512, micro-batch 64", flush=True)
                result["fidelity"] = measure_fidelity(a.ppbench, mpirun, a.steps, a.warmup,
                                                      a.repeats)

    return record_benchmark("mpi_transport", "mpi", a.ppbench, result, measure, print_tables,
                            a.out)


if __name__ == "__main__":
    sys.exit(run("mpi_transport", main))
