"""One point of a sweep: what it asks of ppbench, and the key equivalent requests share.

Point is one requested `ppbench simulate` or `ppbench run`: its argv, its command line and
environment under mpirun, its closed-form companion and its progress label. make_point
normalizes a request (defaults, keys a schedule ignores) so that equivalent ones share a key.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any

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
COMMANDS = ("simulate", "run")
# The closed form recorded beside run points: the theory's uniform per-stage costs.
CLOSED_FORM_COST = "F=1,B=2"


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
                self.gpus, self.workload, self.workload_flags, self.microbatch_size, self.dtype,
                self.steps, self.warmup, self.seed, self.recompute, self.launcher, self.replicas)

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
                 # One spelling per list of words; shlex.join keeps a quoted value one word
                 # when run_argv splits it again.
                 workload_flags=shlex.join(shlex.split(str(workload_flags or ""))),
                 microbatch_size=optional_int(microbatch_size),
                 dtype=None if dtype is None else str(dtype), steps=optional_int(steps),
                 warmup=optional_int(warmup), seed=optional_int(seed),
                 recompute=bool(recompute), launcher=launcher, replicas=replicas)
