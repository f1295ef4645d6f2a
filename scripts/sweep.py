#!/usr/bin/env python3
"""Run a parameter sweep of `ppbench simulate` or `ppbench run` and record every point.

SPEC is a JSON file:

    {"name": "theory",
     "timeout": 300,
     "runs": [{"schedule": ["gpipe", "1f1b"], "devices": [2, 4, 8],
               "microbatches": [1, 2, 4, 8], "chunks": [2], "group_size": [0],
               "cost": ["F=1,B=2"], "comm": [0]},
              {"command": "run", "workload": ["mlp"], "workload_flags": ["--layers 8 --width 256"],
               "schedule": ["1f1b"], "devices": [1, 2, 4], "microbatches": [4, 8],
               "microbatch_size": [8], "steps": [3], "warmup": [1], "dtype": ["f32"]}, ...]}

Each group of "runs" is expanded to the cartesian product of its lists (a scalar counts as a
one-element list; a missing key means ppbench's default). "command" is "simulate" (the default:
keys schedule, devices, microbatches, chunks, group_size, cost, comm) or "run" (real training
steps: keys schedule, devices, microbatches, chunks, group_size, workload, workload_flags,
microbatch_size, dtype, steps, warmup, seed, recompute, backend, virtual_devices).
"workload_flags" is one string of workload options per value ("--preset tiny-llama --seq 64").
"backend" is ppbench's --backend (cpu when not given); "virtual_devices": true (cuda only) runs
each point on one GPU split into D green-context partitions (`--virtual-devices D`, D the point's
devices), which is how benchmarks/sweeps/gpu.json puts D ranks on one GPU.
"chunks" and "group_size" are passed only to schedules that take them (interleaved-1f1b); for the
others they are recorded as 1 and 0. The spec's optional "timeout" is the seconds allowed per
point (--timeout overrides it).

Every point becomes one line of PREFIX.jsonl:
  - exit 0: ppbench's JSON object plus "sweep", "status": "ok", "point" (and for simulate
    points "cost", "comm"; for run points "closed_form": the closed-form bubble of the same
    schedule, D, N, v from `ppbench simulate --cost F=1,B=2`, null where none applies)
  - exit 2: {"status": "invalid", "error": <ppbench's one-line message>, ...point}
  - else:   {"status": "error", "error": ..., ...point}  (crash, timeout, unparseable output)
Exit 3 blames the machine rather than the point (no CUDA device visible, a ppbench built
without CUDA, a library missing): an "error", since the point itself may be valid and must be
retried on a machine that can run it. The exit code decides, never the message.

Points already recorded in PREFIX.jsonl with status ok or invalid are skipped (key: command and
every spec key above, e.g. schedule, devices, microbatches, chunks, group_size, cost, comm,
workload, workload_flags, ...); "error" rows are retried and replaced, and --force re-runs
everything. PREFIX.jsonl is rewritten atomically after every point (temp file in the same
directory, then os.replace), and PREFIX.csv is regenerated from it the same way: simulate rows
in the simulate columns, run rows in the run columns (step time, throughput, measured and
predicted bubble, gap, loss, grad norm, peak bytes, and for GPU runs the GPU, the placement,
the SMs of each rank's partition, whether the driver granted them as requested, and the
transport). When one file holds both kinds, the run rows go to PREFIX-run.csv.

Progress: one line per point, "[i/n] <point> ... <outcome> (<seconds> s)"; GPU rows also name
the partitions they ran on ("4x32 SMs").
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from results_io import atomic_write

# Schedules that take --chunks / --group-size (see `ppbench list`).
CHUNKED_SCHEDULES = frozenset({"interleaved-1f1b"})

SPEC_KEYS = ("schedule", "devices", "microbatches", "chunks", "group_size", "cost", "comm")
RUN_KEYS = ("command", "backend", "virtual_devices", "workload", "workload_flags", "schedule",
            "devices", "microbatches", "chunks", "group_size", "microbatch_size", "dtype", "steps",
            "warmup", "seed", "recompute")
COMMANDS = ("simulate", "run")
# Simulate keys a run point does not take, and run keys a simulate point does not take.
SIMULATE_ONLY = frozenset({"cost", "comm"})
RUN_ONLY = frozenset(RUN_KEYS) - frozenset(SPEC_KEYS) - {"command"}
# The closed form recorded beside run points: the theory's uniform per-stage costs.
CLOSED_FORM_COST = "F=1,B=2"
# ppbench's exit codes (see the module doc).
EXIT_INVALID, EXIT_MACHINE = 2, 3

CSV_COLUMNS = (
    "schedule", "devices", "microbatches", "chunks", "group_size", "cost", "comm", "status",
    "makespan", "bubble_fraction", "bubble_ratio", "zb_bubble_rate", "peak_activations",
    "peak_activation_share", "closed_form_bubble_fraction", "closed_form_idle_per_rank",
    "git_commit", "date",
)

# The requested point's columns of a run row, then its results.
RUN_POINT_COLUMNS = (
    "workload", "workload_flags", "schedule", "devices", "microbatches", "chunks", "group_size",
    "microbatch_size", "dtype", "steps", "warmup", "seed", "recompute", "backend",
    "virtual_devices",
)
RUN_CSV_COLUMNS = RUN_POINT_COLUMNS + (
    "status", "error",
    "params", "step_time_s", "samples_per_s", "tokens_per_s", "measured_makespan",
    "measured_bubble_fraction", "predicted_bubble_fraction", "bubble_gap",
    "measured_zb_bubble_rate", "closed_form_bubble_fraction", "loss", "grad_norm",
    "max_measured_peak_bytes", "max_model_peak_bytes", "gpu", "placement", "sms_per_rank",
    "partitions_as_requested", "transport", "cpu", "cpu_cores", "host", "git_commit", "date",
)


@dataclass(frozen=True)
class Point:
    """One requested run; None means 'not given, ppbench's default'."""

    schedule: str
    devices: int
    microbatches: int
    chunks: int | None = None
    group_size: int | None = None
    cost: str = ""
    comm: float | None = None
    command: str = "simulate"
    backend: str | None = None
    virtual_devices: bool = False
    workload: str = ""
    workload_flags: str = ""
    microbatch_size: int | None = None
    dtype: str | None = None
    steps: int | None = None
    warmup: int | None = None
    seed: int | None = None
    recompute: bool = False

    @property
    def is_run(self) -> bool:
        return self.command == "run"

    def key(self) -> tuple:
        return (self.command, self.schedule, self.devices, self.microbatches, self.chunks,
                self.group_size, self.cost, self.comm, self.backend, self.virtual_devices,
                self.workload, self.workload_flags, self.microbatch_size, self.dtype, self.steps,
                self.warmup, self.seed, self.recompute)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (RUN_KEYS if self.is_run else SPEC_KEYS)}

    def schedule_args(self) -> list[str]:
        args = ["--schedule", self.schedule, "--devices", str(self.devices),
                "--microbatches", str(self.microbatches)]
        if self.schedule in CHUNKED_SCHEDULES:
            if self.chunks is not None:
                args += ["--chunks", str(self.chunks)]
            if self.group_size:
                args += ["--group-size", str(self.group_size)]
        return args

    def argv(self) -> list[str]:
        if self.is_run:
            return self.run_argv()
        args = ["simulate", *self.schedule_args()]
        if self.cost:
            args += ["--cost", self.cost]
        if self.comm is not None:
            args += ["--comm", format_number(self.comm)]
        return args + ["--format", "json"]

    def run_argv(self) -> list[str]:
        args = ["run", "--backend", self.backend or "cpu", "--workload", self.workload,
                *shlex.split(self.workload_flags), *self.schedule_args()]
        if self.virtual_devices:
            args += ["--virtual-devices", str(self.devices)]  # one partition per rank
        for flag, value in (("--microbatch-size", self.microbatch_size), ("--dtype", self.dtype),
                            ("--steps", self.steps), ("--warmup", self.warmup),
                            ("--seed", self.seed)):
            if value is not None:
                args += [flag, str(value)]
        if self.recompute:
            args.append("--recompute")
        return args + ["--format", "json"]

    def closed_form_argv(self) -> list[str]:
        """`ppbench simulate` of the same schedule, D, N, v with the theory's costs."""
        return ["simulate", *self.schedule_args(), "--cost", CLOSED_FORM_COST, "--format", "json"]

    def label(self) -> str:
        text = f"{self.schedule} D={self.devices} N={self.microbatches}"
        if self.is_run:
            text = f"{self.workload} {text}"
        if self.schedule in CHUNKED_SCHEDULES:
            if self.chunks is not None:
                text += f" v={self.chunks}"
            if self.group_size:
                text += f" g={self.group_size}"
        if self.cost:
            text += f" cost={self.cost}"
        if self.comm:
            text += f" comm={format_number(self.comm)}"
        if self.is_run:
            if self.microbatch_size is not None:
                text += f" b={self.microbatch_size}"
            if self.recompute:
                text += " recompute"
            if self.backend not in (None, "cpu"):
                text += f" on {self.backend}"
            if self.virtual_devices:
                text += f" ({self.devices} partition{'' if self.devices == 1 else 's'})"
        return text


def format_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def make_point(schedule: str, devices: int, microbatches: int, chunks: int | None = None,
               group_size: int | None = None, cost: str | None = None,
               comm: float | None = None, command: str | None = None,
               backend: str | None = None, virtual_devices: bool | None = None,
               workload: str | None = None,
               workload_flags: str | None = None, microbatch_size: int | None = None,
               dtype: str | None = None, steps: int | None = None, warmup: int | None = None,
               seed: int | None = None, recompute: bool | None = None) -> Point:
    """Normalize a point so that equivalent requests share one key."""
    command = command or "simulate"
    if command not in COMMANDS:
        raise ValueError(f"unknown command '{command}' (known: {', '.join(COMMANDS)})")
    if schedule in CHUNKED_SCHEDULES:
        group_size = group_size or None
    else:
        chunks, group_size = 1, None
    common = dict(schedule=str(schedule), devices=int(devices), microbatches=int(microbatches),
                  chunks=None if chunks is None else int(chunks), group_size=group_size)
    if command == "simulate":
        return Point(**common, cost=cost or "", comm=None if comm is None else float(comm))
    if not workload:
        raise ValueError("a run point needs a 'workload'")
    if virtual_devices and backend != "cuda":
        raise ValueError("'virtual_devices' splits a GPU: it needs \"backend\": \"cuda\", got "
                         f"{backend or 'cpu'}")
    return Point(**common, command="run", backend=backend or None,
                 virtual_devices=bool(virtual_devices), workload=str(workload),
                 workload_flags=" ".join(shlex.split(str(workload_flags or ""))),
                 microbatch_size=optional_int(microbatch_size),
                 dtype=None if dtype is None else str(dtype), steps=optional_int(steps),
                 warmup=optional_int(warmup), seed=optional_int(seed),
                 recompute=bool(recompute))


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def expand_spec(spec: dict) -> list[Point]:
    """The cartesian product of every group, in order, without duplicates."""
    if not isinstance(spec.get("runs"), list):
        raise ValueError("spec needs a 'runs' list of parameter groups")
    points: dict[tuple, Point] = {}
    for i, group in enumerate(spec["runs"]):
        command = group.get("command", "simulate")
        if command not in COMMANDS:
            raise ValueError(f"runs[{i}]: unknown command '{command}' (known: {COMMANDS})")
        keys = RUN_KEYS if command == "run" else ("command",) + SPEC_KEYS
        unknown = set(group) - set(keys)
        if unknown:
            raise ValueError(f"runs[{i}]: unknown keys {sorted(unknown)} for command "
                             f"'{command}' (known: {keys})")
        required = ("schedule", "devices", "microbatches") + (
            ("workload",) if command == "run" else ())
        for key in required:
            if key not in group:
                raise ValueError(f"runs[{i}]: missing '{key}'")
        names = [k for k in keys if k != "command"]
        lists = [as_list(group.get(k)) for k in names]
        for values in itertools.product(*lists):
            point = make_point(command=command, **dict(zip(names, values)))
            points.setdefault(point.key(), point)
    return list(points.values())


def row_key(row: dict) -> tuple | None:
    """The key of a recorded row: its requested point, as written by this script."""
    point = row.get("point")
    if not isinstance(point, dict):
        point = row  # a row written by another tool: use its top-level fields
    try:
        keys = RUN_KEYS if point.get("command") == "run" else SPEC_KEYS
        return make_point(**{k: point.get(k) for k in keys}).key()
    except (TypeError, ValueError):
        return None


def run_point(ppbench: str, point: Point, sweep: str, timeout: float) -> dict:
    """Run one point and turn the outcome into a row."""
    base = {"sweep": sweep, "point": point.as_dict()}
    try:
        proc = subprocess.run([ppbench, *point.argv()], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return failed_row(point, base, "error", f"timed out after {timeout:g} s")
    except OSError as e:
        return failed_row(point, base, "error", f"cannot run {ppbench}: {e}")
    stderr = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode in (EXIT_INVALID, EXIT_MACHINE):
        message = stderr[0] if stderr else "invalid parameters"
        return failed_row(point, base, "invalid" if proc.returncode == EXIT_INVALID else "error",
                          message)
    if proc.returncode != 0:
        message = stderr[-1] if stderr else ""
        return failed_row(point, base, "error", f"exit {proc.returncode}: {message}".strip())
    try:
        result = json.loads(proc.stdout)
        if not isinstance(result, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        return failed_row(point, base, "error", f"unparseable output: {e}")
    row = dict(result)
    row.update(base)
    row["status"] = "ok"
    if point.is_run:
        row["closed_form"] = closed_form(ppbench, point, timeout)
        row["closed_form_cost"] = CLOSED_FORM_COST
    else:
        row.update({"cost": point.cost, "comm": point.comm})
    return row


def closed_form(ppbench: str, point: Point, timeout: float) -> dict | None:
    """The closed form ppbench states for this schedule, D, N, v (None when it cannot say)."""
    try:
        proc = subprocess.run([ppbench, *point.closed_form_argv()], capture_output=True,
                              text=True, timeout=timeout, check=False)
        result = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (subprocess.TimeoutExpired, OSError, ValueError):
        return None
    value = result.get("closed_form") if isinstance(result, dict) else None
    return value if isinstance(value, dict) else None


def failed_row(point: Point, base: dict, status: str, error: str) -> dict:
    row = point.as_dict()
    row.update(base)
    row.update({"status": status, "error": error})
    return row


class Records:
    """PREFIX.jsonl held in memory: raw lines (kept verbatim) and the rows parsed from them."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: list[str] = []
        self.index: dict[tuple, int] = {}
        if path.exists():
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                self.lines.append(line)
                try:
                    key = row_key(json.loads(line))
                except ValueError:
                    print(f"warning: {path}:{n}: not JSON, kept as is", file=sys.stderr)
                    continue
                if key is not None:
                    self.index[key] = len(self.lines) - 1

    def status(self, point: Point) -> str | None:
        i = self.index.get(point.key())
        return None if i is None else json.loads(self.lines[i]).get("status")

    def put(self, point: Point, row: dict) -> None:
        line = json.dumps(row, sort_keys=False, separators=(",", ":"))
        i = self.index.get(point.key())
        if i is None:
            self.index[point.key()] = len(self.lines)
            self.lines.append(line)
        else:
            self.lines[i] = line
        atomic_write(self.path, "".join(l + "\n" for l in self.lines))

    def rows(self) -> Iterable[dict]:
        for line in self.lines:
            try:
                yield json.loads(line)
            except ValueError:
                continue


def csv_row(row: dict) -> dict[str, Any]:
    point = row.get("point") or {}
    closed = row.get("closed_form") or {}
    prov = row.get("provenance") or {}
    out: dict[str, Any] = {}
    for k in SPEC_KEYS:
        value = row.get(k, point.get(k))
        out[k] = "" if value is None else value
    out["comm"] = "" if out["comm"] == "" else format_number(out["comm"])
    for k in ("status", "makespan", "bubble_fraction", "bubble_ratio", "zb_bubble_rate",
              "peak_activations", "peak_activation_share"):
        out[k] = row.get(k, "")
    out["closed_form_bubble_fraction"] = closed.get("bubble_fraction")
    out["closed_form_idle_per_rank"] = closed.get("idle_per_rank")
    out["git_commit"] = prov.get("git_commit", "")
    out["date"] = prov.get("date", "")
    return {k: ("" if v is None else v) for k, v in out.items()}


def is_run_row(row: dict) -> bool:
    point = row.get("point") or {}
    return (point.get("command") or row.get("command")) == "run"


def numbers(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def run_csv_row(row: dict) -> dict[str, Any]:
    point = row.get("point") or {}
    measured = row.get("measured") or {}
    predicted = row.get("predicted") or {}
    throughput = row.get("throughput") or {}
    prov = row.get("provenance") or {}
    closed = row.get("closed_form") or {}
    act = [a for a in row.get("activation_bytes") or [] if isinstance(a, dict)]
    out: dict[str, Any] = {}
    for k in RUN_POINT_COLUMNS:
        value = point.get(k, row.get(k))
        out[k] = "" if value is None else value
    out["status"] = row.get("status", "")
    out["error"] = row.get("error", "")
    out["params"] = row.get("params")
    out["step_time_s"] = row.get("step_time_s")
    out["samples_per_s"] = throughput.get("samples_per_s")
    out["tokens_per_s"] = throughput.get("tokens_per_s")
    out["measured_makespan"] = measured.get("makespan")
    out["measured_bubble_fraction"] = measured.get("bubble_fraction")
    out["predicted_bubble_fraction"] = predicted.get("bubble_fraction")
    gap = (row.get("fidelity") or {}).get("bubble_fraction_gap")
    if gap is None and None not in (out["measured_bubble_fraction"],
                                     out["predicted_bubble_fraction"]):
        gap = out["measured_bubble_fraction"] - out["predicted_bubble_fraction"]
    out["bubble_gap"] = gap
    out["measured_zb_bubble_rate"] = measured.get("zb_bubble_rate")
    out["closed_form_bubble_fraction"] = closed.get("bubble_fraction")
    out["loss"] = row.get("loss")
    out["grad_norm"] = row.get("grad_norm")
    measured_bytes = numbers(a.get("measured_peak_bytes") for a in act)
    model_bytes = numbers(a.get("model_peak_bytes") for a in act)
    out["max_measured_peak_bytes"] = max(measured_bytes) if measured_bytes else None
    out["max_model_peak_bytes"] = max(model_bytes) if model_bytes else None
    out.update(gpu_columns(row))
    for k in ("cpu", "cpu_cores", "host", "git_commit", "date"):
        out[k] = prov.get(k, "")
    return {k: ("" if v is None else v) for k, v in out.items()}


def gpu_columns(row: dict) -> dict[str, Any]:
    """What a GPU run record says about where it ran ("gpu" in ppbench's JSON); empty on CPU."""
    gpu = row.get("gpu") if isinstance(row.get("gpu"), dict) else {}
    names = [n for n in gpu.get("gpu_names") or [] if isinstance(n, str)]
    sms = [str(n) for n in gpu.get("sms_per_rank") or []]
    partitions = gpu.get("partitions") if isinstance(gpu.get("partitions"), dict) else {}
    granted = partitions.get("as_requested")
    return {"gpu": ", ".join(dict.fromkeys(names)), "placement": gpu.get("placement"),
            "sms_per_rank": "/".join(sms), "transport": gpu.get("transport"),
            "partitions_as_requested": "" if granted is None else str(bool(granted)).lower()}


def partition_text(row: dict) -> str:
    """The ranks' SM partitions of a GPU run record: 4x32 SMs, or 64/32 SMs; "" otherwise."""
    sms = (row.get("gpu") or {}).get("sms_per_rank") if isinstance(row.get("gpu"), dict) else None
    if not sms:
        return ""
    if len(set(sms)) == 1:
        return f"{len(sms)}x{sms[0]} SMs"
    return "/".join(str(n) for n in sms) + " SMs"


def csv_text(columns: tuple[str, ...], make_row, rows: Iterable[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(make_row(row))
    return buf.getvalue()


def write_csv(path: Path, rows: Iterable[dict]) -> list[Path]:
    """PREFIX.csv from the rows (see the module doc for where run rows go); the paths written."""
    rows = list(rows)
    runs = [r for r in rows if is_run_row(r)]
    sims = [r for r in rows if not is_run_row(r)]
    if runs and not sims:
        atomic_write(path, csv_text(RUN_CSV_COLUMNS, run_csv_row, runs))
        return [path]
    atomic_write(path, csv_text(CSV_COLUMNS, csv_row, sims))
    if not runs:
        return [path]
    run_path = path.with_name(path.stem + "-run" + path.suffix)
    atomic_write(run_path, csv_text(RUN_CSV_COLUMNS, run_csv_row, runs))
    return [path, run_path]


def describe(row: dict) -> str:
    if row["status"] == "ok" and is_run_row(row):
        measured = (row.get("measured") or {}).get("bubble_fraction")
        predicted = (row.get("predicted") or {}).get("bubble_fraction")
        rate = (row.get("throughput") or {}).get("samples_per_s")
        parts = []
        if isinstance(measured, (int, float)):
            parts.append(f"bubble {measured:.4f}")
        if isinstance(predicted, (int, float)):
            parts.append(f"predicted {predicted:.4f}")
        if isinstance(rate, (int, float)):
            parts.append(f"{rate:.4g} samples/s")
        if partition_text(row):
            parts.append(partition_text(row))
        return ", ".join(parts) or "ok"
    if row["status"] == "ok":
        bubble = row.get("bubble_fraction")
        return f"bubble {bubble:.4f}" if isinstance(bubble, (int, float)) else "ok"
    return f"{row['status']}: {row.get('error', '')}"


DEFAULT_TIMEOUT = 600.0


def run_sweep(spec_path: Path, ppbench: str, prefix: Path, force: bool = False,
              timeout: float | None = None) -> dict[str, int]:
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    name = spec.get("name") or spec_path.stem
    if timeout is None:
        timeout = float(spec.get("timeout") or DEFAULT_TIMEOUT)
    points = expand_spec(spec)
    records = Records(prefix.with_name(prefix.name + ".jsonl"))
    todo = [p for p in points if force or records.status(p) not in ("ok", "invalid")]
    counts = {"ok": 0, "invalid": 0, "error": 0, "skipped": len(points) - len(todo)}
    print(f"sweep '{name}': {len(points)} points, {counts['skipped']} already recorded in "
          f"{records.path}, {len(todo)} to run", flush=True)
    for i, point in enumerate(todo, 1):
        start = time.monotonic()
        row = run_point(ppbench, point, name, timeout)
        records.put(point, row)
        counts[row["status"]] += 1
        print(f"[{i}/{len(todo)}] {point.label()} ... {describe(row)} "
              f"({time.monotonic() - start:.1f} s)", flush=True)
    write_csv(prefix.with_name(prefix.name + ".csv"), records.rows())
    print(f"sweep '{name}': {counts['ok']} ok, {counts['invalid']} invalid, {counts['error']} "
          f"error, {counts['skipped']} skipped -> {records.path}", flush=True)
    return counts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run `ppbench simulate` or `ppbench run` over the cartesian product of a sweep spec and "
                    "record each point in PREFIX.jsonl and PREFIX.csv.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", type=Path, help="sweep spec (JSON), e.g. benchmarks/sweeps/theory.json")
    parser.add_argument("--ppbench", default="build/ppbench", help="ppbench binary (default: %(default)s)")
    parser.add_argument("--out", required=True, type=Path,
                        help="output prefix: writes PREFIX.jsonl and PREFIX.csv")
    parser.add_argument("--force", action="store_true", help="re-run points already recorded")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds allowed per point (default: the spec's 'timeout', else "
                             f"{DEFAULT_TIMEOUT:g})")
    parser.add_argument("--fail-on-error", action="store_true",
                        help="exit 1 if any point ended with status 'error'")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        counts = run_sweep(args.spec, args.ppbench, args.out, args.force, args.timeout)
    except (OSError, ValueError) as e:
        print(f"sweep: {e}", file=sys.stderr)
        return 2
    return 1 if args.fail_on_error and counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
