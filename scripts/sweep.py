#!/usr/bin/env python3
"""Run a parameter sweep of `ppbench simulate` or `ppbench run` and record every point.

SPEC is a JSON file that follows benchmarks/sweeps/sweep.schema.json (docs/bench.md):

    {"name": "theory",
     "timeout": 300,
     "runs": [{"name": "uniform", "schedule": ["gpipe", "1f1b"], "devices": [2, 4, 8],
               "microbatches": [1, 2, 4, 8], "chunks": [2], "group_size": [0],
               "cost": ["F=1,B=2"], "comm": [0]},
              {"command": "run", "workload": ["mlp"], "workload_flags": ["--layers 8 --width 256"],
               "schedule": ["1f1b"], "devices": [1, 2, 4], "microbatches": [4, 8],
               "microbatch_size": [8], "steps": [3], "warmup": [1], "dtype": ["f32"]}, ...]}

Each group of "runs" is expanded to the cartesian product of its lists (a scalar counts as a
one-element list; a missing key means ppbench's default). "command" is "simulate" (the default:
keys schedule, devices, microbatches, chunks, group_size, cost, comm) or "run" (real training
steps: keys schedule, devices, microbatches, chunks, group_size, workload, workload_flags,
microbatch_size, dtype, steps, warmup, seed, recompute, backend, virtual_devices, launcher,
replicas). A group may
have a "name" (used in messages) and a "description". "workload_flags" is one string of workload
options per value ("--preset tiny-llama --seq 64"). "backend" is ppbench's --backend (cpu when
not given); "virtual_devices": true (cuda only) runs each point on one GPU split into D
green-context partitions (`--virtual-devices D`). "launcher": "mpirun" runs each point as
`mpirun -np P ppbench run ... --devices D [--dp R]`, one pipeline rank per process, with
"replicas" R data-parallel replicas (default 1) and P = D x R ("threads", the default, runs the
ranks as threads of one ppbench; with "backend": "cuda" each process takes the GPU of its local
rank). Where mpirun is not on PATH such groups are skipped with one note line and the rest runs;
a ppbench built without MPI refuses the spec before any point runs (one line, exit 3). "gpus":
true (cuda only) puts rank k on GPU k (`--gpus 0,...,D-1`, NCCL in one process). A group's
"min_gpus" K runs it only where `nvidia-smi -L` lists at least K GPUs (skipped with one note line
elsewhere). It starts
mpirun with OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) set, and with OMPI_MCA_rmaps_base_oversubscribe=1
only where P exceeds the machine's cores. "chunks" is passed only to
schedules that take it (interleaved-1f1b, looped-bfs, interleaved-zb) and "group_size" only to
interleaved-1f1b; for the others they are recorded as 1 and 0. The
spec's optional "timeout" is the seconds allowed per point (--timeout overrides it).

Before anything runs, the spec is checked against the schema (a problem is one line naming the
file, the group by index and name, the key and what is allowed; exit 2) and --ppbench is
probed: a path that does not exist is exit 2, one that exists but cannot run is exit 3.

Every point becomes one line appended to PREFIX.jsonl (results_io.append_jsonl: one write under
an fcntl.flock):
  - exit 0: ppbench's JSON object plus "sweep", "status": "ok", "point" (and for simulate
    points "cost", "comm"; for run points "closed_form": the closed form of the same
    schedule, D, N, v from `ppbench simulate --cost F=1,B=2`, null where none applies)
  - exit 2: {"status": "invalid", "error": <ppbench's one-line message>, ...point}
  - exit 3: {"status": "error", ...}: the machine, not the point (no CUDA device visible, a
    ppbench built without CUDA, a library missing); retried on the next sweep
  - else:   {"status": "error", "error": ..., ...point}  (crash, timeout, unparseable output)
The exit code decides, never the message. Every row also carries "recorded_by": the ppbench
that made it (git commit as ppbench reports it, "-dirty" included, and the binary's sha256) and
the machine (host, CPU model and cores, GPU model).

Resume: a point is skipped when PREFIX.jsonl holds an ok or invalid row of it whose
"recorded_by" equals this sweep's: the same machine and the same ppbench (commit and binary).
Rows of another machine, commit or build are never taken for this one: at the start they are
moved to PREFIX.previous.jsonl (replacing what was there) and their points run again. "error"
rows are retried, and --force re-runs everything. A re-run point is appended again; the later
line stands (results_io.latest_rows), and the file is compacted when the sweep ends.

PREFIX.csv is rewritten atomically after every recorded point, so it always holds the same
points as PREFIX.jsonl: simulate rows in the simulate columns, run rows in the run columns (step
time, throughput, measured and predicted bubble, gap, loss, grad norm, peak bytes, and for GPU
runs the GPU, the placement, the SMs of each rank's partition, whether the driver granted them
as requested, and the transport). When one file holds both kinds, the run rows go to
PREFIX-run.csv. PREFIX.summary.json records what this sweep did (see --summarize).

Ctrl-C (SIGINT) or SIGTERM: the running point's process is killed and that point is not
recorded; every line already in PREFIX.jsonl is whole and PREFIX.csv matches it; one line
"sweep: interrupted after K of M points; records in PREFIX.jsonl" and exit 130 (SIGINT) or
143 (SIGTERM). The next sweep resumes there.

Exit codes: 0 done (--fail-on-error: 1 if a point ended as an error row); 2 a bad spec or
option, or no ppbench at --ppbench; 3 a machine problem (ppbench cannot run, jsonschema is not
installed, another sweep is writing PREFIX, a group under mpirun with a ppbench built without
MPI); 1 ppbench failed its probe; 130/143 interrupted.

Progress: one line per point, "[i/n] <point> ... <outcome> (<seconds> s)"; GPU rows also name
the partitions they ran on ("4x32 SMs").

--summarize PREFIX... prints what the last sweep into each PREFIX did (from PREFIX.summary.json):
points measured, skipped, invalid and errors, the machine and the commit, and with --report and
--figures where those are (`make bench` ends with it).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import itertools
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from results_io import (EXIT_INVALID, EXIT_MACHINE, PpbenchError, append_jsonl, append_text,
                        atomic_write, rewrite_jsonl)

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "benchmarks" / "sweeps" / "sweep.schema.json"

# Schedules that take --chunks (see `ppbench list`); of them only interleaved-1f1b takes
# --group-size (Megatron's micro-batch group size; the others fix their rounds).
CHUNKED_SCHEDULES = frozenset({"interleaved-1f1b", "looped-bfs", "interleaved-zb"})
GROUPED_SCHEDULES = frozenset({"interleaved-1f1b"})

SPEC_KEYS = ("schedule", "devices", "microbatches", "chunks", "group_size", "cost", "comm")
RUN_KEYS = ("command", "backend", "virtual_devices", "gpus", "workload", "workload_flags",
            "schedule", "devices", "microbatches", "chunks", "group_size", "microbatch_size",
            "dtype", "steps", "warmup", "seed", "recompute", "launcher", "replicas")
# How a run point's ranks are started: threads of one ppbench (the default), or one process per
# rank under mpirun.
LAUNCHERS = ("threads", "mpirun")
MPIRUN = "mpirun"
# OpenMPI refuses to run as root unless told (CI containers run as root).
MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# What `ppbench --version` prints when it was built with MPI.
MPI_VERSION_LINE = "MPI: compiled in"
# Keys of a group that describe it rather than its points; a run group's "min_gpus": it runs
# only where nvidia-smi lists at least that many GPUs.
GROUP_META_KEYS = ("name", "description")
RUN_GROUP_META_KEYS = GROUP_META_KEYS + ("min_gpus",)
NVIDIA_SMI = "nvidia-smi"
COMMANDS = ("simulate", "run")
# Simulate keys a run point does not take, and run keys a simulate point does not take.
SIMULATE_ONLY = frozenset({"cost", "comm"})
RUN_ONLY = frozenset(RUN_KEYS) - frozenset(SPEC_KEYS) - {"command"}
# The closed form recorded beside run points: the theory's uniform per-stage costs.
CLOSED_FORM_COST = "F=1,B=2"
# Exit codes of this script beyond ppbench's (results_io): interrupted by a signal: 128 + signum.
EXIT_FAILURE = 1
# What makes a recorded row stand for this sweep's run of the same point (see the module doc).
IDENTITY_FIELDS = ("git_commit", "host", "cpu", "cpu_cores", "gpu", "ppbench_sha256")
# The probe: the cheapest point ppbench has.
PROBE_ARGV = ["simulate", "--schedule", "naive", "--devices", "1", "--microbatches", "1",
              "--format", "json"]
PROBE_TIMEOUT = 120.0

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
    "virtual_devices", "gpus", "launcher", "replicas",
)
RUN_CSV_COLUMNS = RUN_POINT_COLUMNS + (
    "status", "error",
    "params", "step_time_s", "samples_per_s", "tokens_per_s", "measured_makespan",
    "measured_bubble_fraction", "predicted_bubble_fraction", "bubble_gap",
    "measured_zb_bubble_rate", "closed_form_bubble_fraction", "loss", "grad_norm",
    "max_measured_peak_bytes", "max_model_peak_bytes", "gpu", "placement", "sms_per_rank",
    "partitions_as_requested", "transport", "cpu", "cpu_cores", "host", "git_commit", "date",
)


class SpecError(Exception):
    """A bad spec or option: one line for the user, exit 2."""


class MachineError(Exception):
    """The machine or environment stops the sweep (a module missing, the prefix locked): exit 3."""


class Interrupted(Exception):
    """SIGINT or SIGTERM stopped the sweep after `done` of `total` points."""

    def __init__(self, signum: int, done: int, total: int, records: Path):
        super().__init__(f"interrupted after {done} of {total} points; records in {records}")
        self.signum, self.done, self.total, self.records = signum, done, total, records


class Stopped(Exception):
    """Raised where a child process ends because a stop signal came (see run_child)."""


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
    gpus: bool = False  # --gpus 0,...,D-1: one whole GPU per rank, NCCL in one process
    workload: str = ""
    workload_flags: str = ""
    microbatch_size: int | None = None
    dtype: str | None = None
    steps: int | None = None
    warmup: int | None = None
    seed: int | None = None
    recompute: bool = False
    launcher: str | None = None  # None: threads of one ppbench; "mpirun": one process per rank
    replicas: int | None = None  # --dp R under mpirun (None: threads)

    @property
    def is_run(self) -> bool:
        return self.command == "run"

    @property
    def processes(self) -> int:
        """The processes mpirun starts: one per pipeline rank of every replica."""
        return self.devices * (self.replicas or 1)

    def key(self) -> tuple:
        return (self.command, self.schedule, self.devices, self.microbatches, self.chunks,
                self.group_size, self.cost, self.comm, self.backend, self.virtual_devices,
                self.gpus, self.workload, self.workload_flags, self.microbatch_size, self.dtype, self.steps,
                self.warmup, self.seed, self.recompute, self.launcher, self.replicas)

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
        if self.gpus:
            args += ["--gpus", ",".join(str(g) for g in range(self.devices))]
        for flag, value in (("--microbatch-size", self.microbatch_size), ("--dtype", self.dtype),
                            ("--steps", self.steps), ("--warmup", self.warmup),
                            ("--seed", self.seed)):
            if value is not None:
                args += [flag, str(value)]
        if self.recompute:
            args.append("--recompute")
        if self.replicas is not None and self.replicas > 1:
            args += ["--dp", str(self.replicas)]
        return args + ["--format", "json"]

    def command_line(self, ppbench: str) -> list[str]:
        """The whole command of the point: ppbench's argv, under mpirun where it asks for it."""
        argv = [ppbench, *self.argv()]
        if self.launcher == "mpirun":
            return [MPIRUN, "-np", str(self.processes), *argv]
        return argv

    def environment(self, cores: int | None) -> dict[str, str] | None:
        """The child's environment: None (inherited) for threads; mpirun's allowances added."""
        if self.launcher != "mpirun":
            return None
        env = dict(os.environ, **MPIRUN_ENV)
        if cores is not None and self.processes > cores:
            env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
        return env

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
            if self.gpus:
                text += f" ({self.devices} GPU{'' if self.devices == 1 else 's'})"
            if self.launcher == "mpirun":
                text += f" R={self.replicas}" if (self.replicas or 1) > 1 else ""
                text += f" in {self.processes} processes (mpirun)"
        return text


def format_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def make_point(schedule: str, devices: int, microbatches: int, chunks: int | None = None,
               group_size: int | None = None, cost: str | None = None,
               comm: float | None = None, command: str | None = None,
               backend: str | None = None, virtual_devices: bool | None = None,
               gpus: bool | None = None, workload: str | None = None,
               workload_flags: str | None = None, microbatch_size: int | None = None,
               dtype: str | None = None, steps: int | None = None, warmup: int | None = None,
               seed: int | None = None, recompute: bool | None = None,
               launcher: str | None = None, replicas: int | None = None) -> Point:
    """Normalize a point so that equivalent requests share one key."""
    command = command or "simulate"
    if command not in COMMANDS:
        raise ValueError(f"unknown command '{command}' (known: {', '.join(COMMANDS)})")
    if schedule in GROUPED_SCHEDULES:
        group_size = group_size or None
    elif schedule in CHUNKED_SCHEDULES:
        group_size = None
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
    if gpus and backend != "cuda":
        raise ValueError("'gpus' puts a rank on each GPU: it needs \"backend\": \"cuda\", got "
                         f"{backend or 'cpu'}")
    if gpus and virtual_devices:
        raise ValueError("'gpus' and 'virtual_devices' are two placements: give one")
    launcher = None if launcher in (None, "threads") else str(launcher)
    if launcher is not None and launcher not in LAUNCHERS:
        raise ValueError(f"unknown launcher '{launcher}' (known: {', '.join(LAUNCHERS)})")
    if launcher == "mpirun":
        if virtual_devices or gpus:
            raise ValueError("\"launcher\": \"mpirun\" puts each process on the GPU of its "
                             "local rank: 'virtual_devices' and 'gpus' are for threads")
        replicas = 1 if replicas is None else int(replicas)
    elif replicas is not None and int(replicas) != 1:
        raise ValueError(f"'replicas' {replicas} (--dp) needs one process per rank: "
                         "\"launcher\": \"mpirun\"")
    else:
        replicas = None
    return Point(**common, command="run", backend=backend or None,
                 virtual_devices=bool(virtual_devices), gpus=bool(gpus), workload=str(workload),
                 workload_flags=" ".join(shlex.split(str(workload_flags or ""))),
                 microbatch_size=optional_int(microbatch_size),
                 dtype=None if dtype is None else str(dtype), steps=optional_int(steps),
                 warmup=optional_int(warmup), seed=optional_int(seed),
                 recompute=bool(recompute), launcher=launcher, replicas=replicas)


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def expand_spec(spec: dict) -> list[Point]:
    """The cartesian product of every group, in order, without duplicates.

    Checks what make_point checks (known command and keys, the required ones, virtual_devices
    only with cuda) and raises ValueError naming the group; load_spec checks the schema first.
    """
    if not isinstance(spec.get("runs"), list):
        raise ValueError("spec needs a 'runs' list of parameter groups")
    points: dict[tuple, Point] = {}
    for i, group in enumerate(spec["runs"]):
        where = group_text(i, group)
        if not isinstance(group, dict):
            raise ValueError(f"{where}: a group is a JSON object, got {short_json(group)}")
        command = group.get("command", "simulate")
        if command not in COMMANDS:
            raise ValueError(f"{where}: unknown command '{command}' (known: {', '.join(COMMANDS)})")
        keys = RUN_KEYS if command == "run" else ("command",) + SPEC_KEYS
        meta = RUN_GROUP_META_KEYS if command == "run" else GROUP_META_KEYS
        unknown = set(group) - set(keys) - set(meta)
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} for command "
                             f"'{command}' (known: {', '.join(keys + meta)})")
        required = ("schedule", "devices", "microbatches") + (
            ("workload",) if command == "run" else ())
        for key in required:
            if key not in group:
                raise ValueError(f"{where}: missing '{key}'")
        names = [k for k in keys if k != "command"]
        lists = [as_list(group.get(k)) for k in names]
        for values in itertools.product(*lists):
            try:
                point = make_point(command=command, **dict(zip(names, values)))
            except (TypeError, ValueError) as e:
                raise ValueError(f"{where}: {e}") from None
            points.setdefault(point.key(), point)
    return list(points.values())


def group_text(index: int, group: Any) -> str:
    """runs[1] ("transformer"): the group by index, and by name when it has one."""
    name = group.get("name") if isinstance(group, dict) else None
    return f'runs[{index}]' + (f' ("{name}")' if isinstance(name, str) and name else "")


def short_json(value: Any, limit: int = 60) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# --- checking a spec -----------------------------------------------------------------------

def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (a finite number is needed)")


def load_spec(path: Path) -> tuple[dict, list[Point]]:
    """Read, check against the schema and expand a spec; SpecError (exit 2) with one line
    naming the file, the group and the key; MachineError (exit 3) without jsonschema."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{path}: cannot read the spec: {e.strerror or e}") from None
    try:
        spec = json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as e:
        raise SpecError(f"{path}: not JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except ValueError as e:
        raise SpecError(f"{path}: not JSON: {e}") from None
    problem = schema_problem(spec)
    if problem:
        raise SpecError(f"{path}: {problem}")
    try:
        points = expand_spec(spec)
    except ValueError as e:
        raise SpecError(f"{path}: {e}") from None
    return spec, points


def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def schema_problem(spec: Any) -> str | None:
    """The first problem of spec against benchmarks/sweeps/sweep.schema.json as one line
    (where, which key, what is allowed), or None when it conforms."""
    try:
        import jsonschema
    except ImportError:
        raise MachineError("the Python module jsonschema is not installed (needed to check sweep "
                           "specs): install it with '.venv/bin/pip install -r "
                           "scripts/requirements.txt' (or 'make deps')") from None
    schema = load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(spec))
    if error is None:
        return None
    return describe_schema_error(error, spec, schema)


def key_description(schema: dict, group: Any, key: str) -> str:
    """The schema's description of key: a group key (simulate or run group) or a top-level one."""
    defs = schema["$defs"]
    if group is None:
        prop = schema["properties"].get(key, {})
    else:
        kind = "runGroup" if isinstance(group, dict) and group.get("command") == "run" \
            else "simulateGroup"
        prop = defs[kind]["properties"].get(key, {})
    if "description" not in prop and "$ref" in prop:
        prop = defs[prop["$ref"].rsplit("/", 1)[1]]
    return prop.get("description", "")


def group_keys(schema: dict, group: Any) -> tuple[str, list[str], list[str]]:
    kind = "run" if isinstance(group, dict) and group.get("command") == "run" else "simulate"
    body = schema["$defs"][f"{kind}Group"]
    return kind, list(body["properties"]), list(body["required"])


def describe_schema_error(error: Any, spec: Any, schema: dict) -> str:
    path = list(error.absolute_path)
    group = None
    if len(path) >= 2 and path[0] == "runs" and isinstance(path[1], int):
        group = spec["runs"][path[1]]
        where = group_text(path[1], group)
        rest = path[2:]
    else:
        where = "top level"
        rest = path
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else "?"
        if group is None and not rest:
            return (f"{where}: missing key \"{missing}\"; allowed: "
                    f"{key_description(schema, None, missing)}")
        kind, _, required = group_keys(schema, group)
        return (f"{where}: missing key \"{missing}\" (a {kind} group needs "
                f"{', '.join(required)}); allowed: {key_description(schema, group, missing)}")
    if error.validator == "additionalProperties":
        instance = error.instance if isinstance(error.instance, dict) else {}
        if group is None and not rest:
            known = list(schema["properties"])
            kind_text = "a sweep spec"
        else:
            kind, known, _ = group_keys(schema, group)
            kind_text = f"a {kind} group"
        extra = [k for k in instance if k not in known]
        key = extra[0] if extra else "?"
        return (f"{where}: unknown key \"{key}\"; allowed keys for {kind_text}: "
                f"{', '.join(known)}")
    if not rest:  # the group itself, or the whole spec
        if group is None and where == "top level" and path == []:
            return f"top level: {error.message}; allowed: {schema['description'].split('.')[0]}"
        return (f"{where}: {short_json(error.instance)} is not allowed; allowed: "
                f"{schema['$defs']['group']['description'] if group is not None or path else ''}")
    key = str(rest[0])
    value = (group if group is not None else spec).get(key) if isinstance(
        group if group is not None else spec, dict) else error.instance
    if key == "runs" and group is None:
        if len(rest) >= 2 and isinstance(rest[1], int):
            return (f"runs[{rest[1]}]: {short_json(error.instance)} is not allowed; allowed: "
                    f"{schema['$defs']['group']['description']}")
        return f"{where}: key \"runs\": {short_json(value)} is not allowed; allowed: " \
               f"{key_description(schema, None, 'runs')}"
    item = ""
    if len(rest) >= 2 and isinstance(rest[1], int):
        item = f" (item {rest[1]}: {short_json(error.instance)})"
    return (f"{where}: key \"{key}\": {short_json(value)}{item} is not allowed; allowed: "
            f"{key_description(schema, group, key)}")


def positive_finite(value: Any, what: str) -> float:
    """value as seconds: a positive, finite number, else SpecError."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{what} must be a positive number of seconds, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise SpecError(f"{what} must be a positive, finite number of seconds, got {value!r}")
    return number


# --- ppbench ---------------------------------------------------------------------------------

class _Stop:
    """What the signal handlers share with run_child: the signal that came, the running child."""

    signum: int | None = None
    child: subprocess.Popen | None = None


STOP = _Stop()


def _on_signal(signum: int, frame: Any) -> None:
    STOP.signum = signum
    child = STOP.child
    if child is not None and child.returncode is None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM kill the running child and set STOP.signum instead of raising, so
    that a record is never cut in half; the old handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    STOP.signum = None
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def run_child(argv: list[str], timeout: float,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess | None:
    """Run argv in its own process group (env: its environment, None to inherit); None on
    timeout (the group is killed, mpirun's processes with it). Raises Stopped when a stop
    signal came while it ran (the handler killed it), OSError when it cannot start."""
    if STOP.signum is not None:
        raise Stopped()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    STOP.child = proc
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.communicate()
            if STOP.signum is not None:
                raise Stopped() from None
            return None
    finally:
        STOP.child = None
        if proc.returncode is None:  # an exception in communicate: leave nothing running
            kill_group(proc)
            proc.wait()
    if STOP.signum is not None:
        raise Stopped()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a point's whole process group (ppbench and anything it started)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def first_line(text: str) -> str:
    return next((l.strip() for l in text.splitlines() if l.strip()), "")


def probe(ppbench: str) -> dict[str, Any]:
    """Check that ppbench runs (before the first point) and say who records: recorded_by.

    PpbenchError 2: no such file; 3: it exists but cannot run (not executable, not a program,
    ppbench's own exit 3); 1: it runs but fails the probe.
    """
    if not os.path.exists(ppbench):
        raise PpbenchError(f"--ppbench {ppbench}: no such file (build it first: make)", 2)
    if os.path.isdir(ppbench) or not os.access(ppbench, os.X_OK):
        raise PpbenchError(f"--ppbench {ppbench}: exists but is not an executable file", 3)
    text = " ".join(PROBE_ARGV[:7])
    try:
        proc = run_child([ppbench, *PROBE_ARGV], PROBE_TIMEOUT)
    except OSError as e:
        raise PpbenchError(f"--ppbench {ppbench}: cannot run it: {e.strerror or e}", 3) from None
    if proc is None:
        raise PpbenchError(f"--ppbench {ppbench}: '{text}' did not finish in "
                           f"{PROBE_TIMEOUT:g} s", 3)
    if proc.returncode != 0:
        code = EXIT_MACHINE if proc.returncode == EXIT_MACHINE else EXIT_FAILURE
        raise PpbenchError(f"--ppbench {ppbench}: '{text}' exited {proc.returncode}: "
                           f"{first_line(proc.stderr) or 'no message'}", code)
    try:
        prov = json.loads(proc.stdout)["provenance"]
        if not isinstance(prov, dict):
            raise TypeError("provenance is not an object")
    except (ValueError, KeyError, TypeError) as e:
        raise PpbenchError(f"--ppbench {ppbench}: '{text}' printed no record with provenance: "
                           f"{e}", EXIT_FAILURE) from None
    gpus: list[str] = []
    mpi = False
    try:
        version = run_child([ppbench, "--version"], PROBE_TIMEOUT)
        for line in (version.stdout + version.stderr).splitlines() if version else []:
            head, _, rest = line.partition(": ")
            if head.startswith("GPU ") and head[4:].strip().isdigit() and rest:
                gpus.append(rest.split(",")[0].strip())
            mpi = mpi or line.startswith(MPI_VERSION_LINE)
    except OSError:
        pass
    return {"git_commit": prov.get("git_commit"), "host": prov.get("host"),
            "cpu": prov.get("cpu"), "cpu_cores": prov.get("cpu_cores"),
            "gpu": ", ".join(gpus) or None, "mpi": mpi, "ppbench": ppbench,
            "ppbench_sha256": sha256_of(ppbench)}


def visible_gpu_count() -> int:
    """The GPUs `nvidia-smi -L` lists (one "GPU k: ..." line each); 0 without nvidia-smi."""
    if shutil.which(NVIDIA_SMI) is None:
        return 0
    try:
        proc = subprocess.run([NVIDIA_SMI, "-L"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if proc.returncode != 0:
        return 0
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))


def groups_to_skip(spec: dict, spec_path: Path, recorded_by: dict) -> tuple[set[int], list[str]]:
    """The groups this machine cannot run, and one note line per reason, so that the rest of
    the sweep still runs: groups under mpirun where there is no mpirun on PATH, and groups
    whose "min_gpus" exceeds the GPUs nvidia-smi lists. A group under mpirun with mpirun
    present but a ppbench built without MPI is a MachineError (exit 3, one line naming the
    group): that ppbench is the wrong build for the spec, not a machine without MPI."""
    no_mpirun: list[str] = []
    few_gpus: list[str] = []
    skip: set[int] = set()
    gpus: int | None = None
    for i, group in enumerate(spec.get("runs") or []):
        if not isinstance(group, dict):
            continue
        need = group.get("min_gpus")
        if isinstance(need, int) and need > 0:
            gpus = visible_gpu_count() if gpus is None else gpus
            if gpus < need:
                skip.add(i)
                few_gpus.append(f"{group_text(i, group)} (needs {need})")
                continue
        if MPIRUN not in as_list(group.get("launcher")):
            continue
        if shutil.which(MPIRUN) is None:
            skip.add(i)
            no_mpirun.append(group_text(i, group))
            continue
        if not recorded_by.get("mpi"):
            where = f"{spec_path}: {group_text(i, group)}"
            raise MachineError(f"{where}: \"launcher\": \"mpirun\" needs a ppbench built with "
                               f"MPI and {recorded_by.get('ppbench')} was not (its --version "
                               f"lacks '{MPI_VERSION_LINE}': install libopenmpi-dev, re-run cmake)")
    notes = []
    if no_mpirun:
        notes.append(f"no mpirun on PATH (Debian: openmpi-bin; make deps installs it): skipping "
                     f"{', '.join(no_mpirun)} (\"launcher\": \"mpirun\")")
    if few_gpus:
        listed = f"{gpus} GPU{'' if gpus == 1 else 's'}"
        notes.append(f"nvidia-smi lists {listed}: skipping {', '.join(few_gpus)} (\"min_gpus\")")
    return skip, notes


def identity_of(recorded_by: Any) -> tuple | None:
    if not isinstance(recorded_by, dict):
        return None
    return tuple(recorded_by.get(k) for k in IDENTITY_FIELDS)


def machine_text(rb: dict) -> str:
    """host vm, CPU AMD EPYC (2 cores), no GPU."""
    cores = f" ({rb['cpu_cores']} cores)" if rb.get("cpu_cores") else ""
    gpu = f"GPU {rb['gpu']}" if rb.get("gpu") else "no GPU visible to ppbench"
    return f"host {rb.get('host') or 'unknown'}, CPU {rb.get('cpu') or 'unknown'}{cores}, {gpu}"


def who_text(rb: dict) -> str:
    sha = str(rb.get("ppbench_sha256") or "")[:12]
    return (f"ppbench at commit {rb.get('git_commit') or 'unknown'}"
            + (f" (binary sha256 {sha}…)" if sha else "") + f" on {machine_text(rb)}")


# --- running points -------------------------------------------------------------------------

def run_point(ppbench: str, point: Point, sweep: str, timeout: float,
              recorded_by: dict | None = None) -> dict:
    """Run one point and turn the outcome into a row (Stopped when a stop signal came)."""
    base: dict[str, Any] = {"sweep": sweep, "point": point.as_dict()}
    if recorded_by is not None:
        base["recorded_by"] = recorded_by
    try:
        proc = run_child(point.command_line(ppbench), timeout, point.environment(os.cpu_count()))
    except OSError as e:
        return failed_row(point, base, "error", f"cannot run {ppbench}: {e}")
    if proc is None:
        return failed_row(point, base, "error", f"timed out after {timeout:g} s")
    stderr = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode in (EXIT_INVALID, EXIT_MACHINE):
        message = stderr[0] if stderr else (
            "invalid parameters" if proc.returncode == EXIT_INVALID else "machine problem")
        return failed_row(point, base, "invalid" if proc.returncode == EXIT_INVALID else "error",
                          message, proc.returncode)
    if proc.returncode != 0:
        message = stderr[-1] if stderr else ""
        return failed_row(point, base, "error", f"exit {proc.returncode}: {message}".strip(),
                          proc.returncode)
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
        proc = run_child([ppbench, *point.closed_form_argv()], timeout)
        result = json.loads(proc.stdout) if proc is not None and proc.returncode == 0 else None
    except (OSError, ValueError):
        return None
    value = result.get("closed_form") if isinstance(result, dict) else None
    return value if isinstance(value, dict) else None


def failed_row(point: Point, base: dict, status: str, error: str,
               exit_code: int | None = None) -> dict:
    row = point.as_dict()
    row.update(base)
    row.update({"status": status, "error": error})
    if exit_code is not None:
        row["exit_code"] = exit_code
    return row


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


class Records:
    """PREFIX.jsonl: the rows of this sweep's ppbench and machine, one per point (the last
    line of a point stands), and what the file held from others (set aside at settle())."""

    def __init__(self, prefix: Path, recorded_by: dict):
        self.path = prefix.with_name(prefix.name + ".jsonl")
        self.csv_path = prefix.with_name(prefix.name + ".csv")
        self.previous_path = prefix.with_name(prefix.name + ".previous.jsonl")
        self.identity = identity_of(recorded_by)
        self.rows: dict[tuple, dict] = {}
        self.others: list[str] = []         # raw lines of other machines / builds / unreadable
        self.other_by: dict[tuple, dict] = {}
        self.unattributed = 0
        self.lines = 0
        if self.path.exists():
            for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                self.lines += 1
                try:
                    row = json.loads(line)
                    key = row_key(row) if isinstance(row, dict) else None
                except ValueError:
                    print(f"warning: {self.path}:{n}: not JSON, set aside", file=sys.stderr)
                    key, row = None, None
                if key is not None and identity_of(row.get("recorded_by")) == self.identity:
                    self.rows[key] = row  # a later line of the point replaces it in place
                else:
                    self.others.append(line)
                    if isinstance(row, dict) and isinstance(row.get("recorded_by"), dict):
                        self.other_by.setdefault(identity_of(row["recorded_by"]),
                                                 row["recorded_by"])
                    else:
                        self.unattributed += 1

    def settle(self) -> str | None:
        """Move other rows to PREFIX.previous.jsonl, compact PREFIX.jsonl, write PREFIX.csv;
        returns a line saying what was set aside (None when nothing was)."""
        message = None
        if self.others:
            atomic_write(self.previous_path, "".join(l + "\n" for l in self.others))
            whose = [who_text(rb) for rb in list(self.other_by.values())[:2]]
            if len(self.other_by) > 2:
                whose.append("…")
            if self.unattributed:
                whose.append(f"{self.unattributed} without recorded_by, e.g. copies of the "
                             "committed reference records")
            message = (f"set aside {len(self.others)} records of another machine or ppbench "
                       f"build ({'; '.join(whose)}) in {self.previous_path}: they do not stand "
                       "for this run")
        if self.lines != len(self.rows) or not self.path.exists():
            rewrite_jsonl(self.path, self.rows.values())  # created empty when new, like the CSV
            self.lines = len(self.rows)
        self.write_csv()
        return message

    def status(self, point: Point) -> str | None:
        row = self.rows.get(point.key())
        return None if row is None else row.get("status")

    def put(self, point: Point, row: dict) -> None:
        """Append the row (one locked write), then bring PREFIX.csv in step: a new point whose
        kind the CSV already holds is appended as one row; anything else (a point run again,
        the first row of a kind) rewrites the CSV atomically."""
        append_jsonl(self.path, row)
        self.lines += 1
        key = point.key()
        before = csv_layout(self.rows.values())
        new = key not in self.rows
        self.rows[key] = row
        if new and before == csv_layout(self.rows.values()) and self.csv_path.exists():
            path, columns, make_row = csv_target(self.csv_path, before, is_run_row(row))
            append_text(path, csv_text(columns, make_row, [row], header=False))
        else:
            self.write_csv()

    def compact(self) -> None:
        if self.lines != len(self.rows):
            rewrite_jsonl(self.path, self.rows.values())
            self.lines = len(self.rows)

    def write_csv(self) -> list[Path]:
        return write_csv(self.csv_path, self.rows.values())


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


def csv_text(columns: tuple[str, ...], make_row, rows: Iterable[dict],
             header: bool = True) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow(make_row(row))
    return buf.getvalue()


def csv_layout(rows: Iterable[dict]) -> tuple[bool, bool]:
    """(any run rows, any simulate rows): which CSV files hold which rows (write_csv)."""
    kinds = {is_run_row(r) for r in rows}
    return (True in kinds, False in kinds)


def csv_target(path: Path, layout: tuple[bool, bool], run: bool):
    """The file, columns and row maker a row of that kind goes to under a layout."""
    if not run:
        return path, CSV_COLUMNS, csv_row
    if layout[1]:  # simulate rows too: the run rows have PREFIX-run.csv
        return path.with_name(path.stem + "-run" + path.suffix), RUN_CSV_COLUMNS, run_csv_row
    return path, RUN_CSV_COLUMNS, run_csv_row


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


@contextmanager
def prefix_lock(prefix: Path) -> Iterator[None]:
    """One sweep at a time per PREFIX: an exclusive flock on PREFIX.jsonl.lock while it runs."""
    import fcntl
    lock = prefix.with_name(prefix.name + ".jsonl.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MachineError(f"another sweep is writing {prefix}.jsonl (it holds {lock})") \
                from None
        yield
    finally:
        os.close(fd)


def run_sweep(spec_path: Path, ppbench: str, prefix: Path, force: bool = False,
              timeout: float | None = None) -> dict[str, int]:
    """Check the spec and ppbench, run the points not yet recorded, return the counts.

    Raises SpecError (2), PpbenchError (its code), MachineError (3) before any point runs, and
    Interrupted after a stop signal (every record written is whole, PREFIX.csv matches).
    """
    with stop_signals():
        spec, points = load_spec(spec_path)
        name = spec.get("name") or spec_path.stem
        if timeout is None:
            timeout = positive_finite(spec.get("timeout", DEFAULT_TIMEOUT),
                                      f"{spec_path}: timeout")
        else:
            timeout = positive_finite(timeout, "--timeout")
        try:
            recorded_by = probe(str(ppbench))
        except Stopped:
            raise Interrupted(STOP.signum or signal.SIGINT, 0, len(points),
                              prefix.with_name(prefix.name + ".jsonl")) from None
        skip, notes = groups_to_skip(spec, spec_path, recorded_by)
        if skip:
            kept = [g for i, g in enumerate(spec["runs"]) if i not in skip]
            points = expand_spec({**spec, "runs": kept}) if kept else []
        with prefix_lock(prefix):
            return sweep_points(spec_path, name, points, ppbench, prefix, force, timeout,
                                recorded_by, notes)


def sweep_points(spec_path: Path, name: str, points: list[Point], ppbench: str, prefix: Path,
                 force: bool, timeout: float, recorded_by: dict,
                 notes: Iterable[str] = ()) -> dict[str, int]:
    records = Records(prefix, recorded_by)
    set_aside = records.settle()
    todo = [p for p in points if force or records.status(p) not in ("ok", "invalid")]
    counts = {"ok": 0, "invalid": 0, "error": 0, "skipped": len(points) - len(todo)}
    print(f"sweep '{name}': {who_text(recorded_by)}", flush=True)
    for note in notes:
        print(f"sweep '{name}': note: {note}", flush=True)
    if set_aside:
        print(f"sweep '{name}': {set_aside}", flush=True)
    print(f"sweep '{name}': {len(points)} points, {counts['skipped']} already recorded in "
          f"{records.path} by this ppbench on this machine, {len(todo)} to run", flush=True)
    done = 0
    interrupted: int | None = None
    try:
        for i, point in enumerate(todo, 1):
            start = time.monotonic()
            try:
                row = run_point(ppbench, point, name, timeout, recorded_by)
            except Stopped:
                interrupted = STOP.signum
                break
            records.put(point, row)
            done += 1
            counts[row["status"]] += 1
            print(f"[{i}/{len(todo)}] {point.label()} ... {describe(row)} "
                  f"({time.monotonic() - start:.1f} s)", flush=True)
            if STOP.signum is not None:
                interrupted = STOP.signum
                break
        if interrupted is None:
            records.compact()
    finally:
        write_summary(prefix, spec_path, name, points, counts, records, recorded_by,
                      interrupted is not None)
    if interrupted is not None:
        raise Interrupted(interrupted, done, len(todo), records.path)
    print(f"sweep '{name}': {counts['ok']} ok, {counts['invalid']} invalid, {counts['error']} "
          f"error, {counts['skipped']} skipped -> {records.path}", flush=True)
    return counts


def summary_path(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".summary.json")


def write_summary(prefix: Path, spec_path: Path, name: str, points: list[Point],
                  counts: dict[str, int], records: Records, recorded_by: dict,
                  interrupted: bool) -> None:
    commands = sorted({p.command for p in points})
    atomic_write(summary_path(prefix), json.dumps({
        "sweep": name, "spec": str(spec_path),
        "command": commands[0] if len(commands) == 1 else "mixed",
        "points": len(points), **counts, "interrupted": interrupted,
        "records": str(records.path), "csv": str(records.csv_path),
        "recorded_by": recorded_by,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }, indent=1) + "\n")


def summarize(prefixes: list[Path], reports: list[str] | None = None,
              figures: str | None = None) -> list[str]:
    """The lines `make bench` ends with: per sweep what was measured, skipped, invalid and
    failed; the machine and commit; where the report and figures are."""
    summaries = []
    for prefix in prefixes:
        try:
            summaries.append((prefix, json.loads(summary_path(prefix).read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            summaries.append((prefix, None))
    by = [s["recorded_by"] for _, s in summaries if s and isinstance(s.get("recorded_by"), dict)]
    lines = ["bench summary:"]
    if by:
        commits = sorted({str(b.get("git_commit")) for b in by})
        machines = list(dict.fromkeys(machine_text(b) for b in by))
        lines.append(f"  ppbench at commit {', '.join(commits)} on {'; '.join(machines)}")
    for prefix, s in summaries:
        if s is None:
            lines.append(f"  {prefix.name}: not run (no {summary_path(prefix)})")
            continue
        word = "measured" if s.get("command") == "run" else (
            "simulated" if s.get("command") == "simulate" else "ran ok")
        text = (f"  {s.get('sweep', prefix.name)}: {s.get('points', 0)} points: "
                f"{s.get('ok', 0)} {word}, {s.get('skipped', 0)} skipped (already recorded), "
                f"{s.get('invalid', 0)} invalid, {s.get('error', 0)} errors -> {s.get('records')}")
        if s.get("interrupted"):
            text += " (interrupted)"
        lines.append(text)
    for report in reports or []:
        lines.append(f"  report: {report}")
    if figures:
        lines.append(f"  figures: {figures}")
    return lines


class OneLineParser(argparse.ArgumentParser):
    """Bad options are one line on stderr and exit 2, like ppbench."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"sweep: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def timeout_arg(text: str) -> float:
    try:
        return positive_finite(text, "--timeout")
    except SpecError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        description="Run `ppbench simulate` or `ppbench run` over the cartesian product of a "
                    "sweep spec and record each point in PREFIX.jsonl and PREFIX.csv.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", type=Path, nargs="?",
                        help="sweep spec (JSON, benchmarks/sweeps/sweep.schema.json), e.g. "
                             "benchmarks/sweeps/theory.json")
    parser.add_argument("--ppbench", default="build/ppbench",
                        help="ppbench binary (default: %(default)s)")
    parser.add_argument("--out", type=Path,
                        help="output prefix: writes PREFIX.jsonl and PREFIX.csv")
    parser.add_argument("--force", action="store_true", help="re-run points already recorded")
    parser.add_argument("--timeout", type=timeout_arg, default=None,
                        help="seconds allowed per point, positive and finite (default: the "
                             f"spec's 'timeout', else {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--fail-on-error", action="store_true",
                        help="exit 1 if any point ended with status 'error'")
    parser.add_argument("--summarize", type=Path, nargs="+", metavar="PREFIX",
                        help="print what the last sweep into each PREFIX did, then exit")
    parser.add_argument("--report", action="append", default=[],
                        help="with --summarize: where a report is (may be given again)")
    parser.add_argument("--figures", help="with --summarize: where the figures are")
    args = parser.parse_args(argv)
    if args.summarize is None and (args.spec is None or args.out is None):
        parser.error("a SPEC and --out PREFIX are needed (or --summarize PREFIX...)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.summarize is not None:
        print("\n".join(summarize(args.summarize, args.report, args.figures)))
        return 0
    try:
        counts = run_sweep(args.spec, args.ppbench, args.out, args.force, args.timeout)
    except SpecError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return EXIT_INVALID
    except PpbenchError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return e.code
    except MachineError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return EXIT_MACHINE
    except Interrupted as e:
        print(f"sweep: {e}", file=sys.stderr, flush=True)
        return 128 + e.signum
    except OSError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return EXIT_MACHINE
    return 1 if args.fail_on_error and counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
