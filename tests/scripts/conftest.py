"""Shared fixtures for the tests of scripts/: import paths, the fake ppbench, synthetic data."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
FAKE_PPBENCH = Path(__file__).resolve().parent / "fake_ppbench.py"

sys.path.insert(0, str(SCRIPTS))
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def fake_ppbench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """(path of an executable fake ppbench, file logging each call's argv as a JSON line)."""
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_PPBENCH_LOG", str(log))
    wrapper = tmp_path / "ppbench"
    wrapper.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{FAKE_PPBENCH}' \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper), log


@pytest.fixture
def fake_mpirun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `mpirun` first on PATH that logs each call (argv and the OpenMPI variables it was given)
    as a JSON line in the returned file, then runs the command once, as process 0 of -np P, with
    OMPI_COMM_WORLD_SIZE=P as OpenMPI sets it; `mpirun --version` prints OpenMPI's first line."""
    log = tmp_path / "mpirun.jsonl"
    bin_dir = tmp_path / "mpibin"
    bin_dir.mkdir()
    script = bin_dir / "mpirun"
    script.write_text(f"""#!{sys.executable}
import json, os, sys
argv = sys.argv[1:]
with open({str(log)!r}, "a") as f:
    f.write(json.dumps({{"argv": argv, "env": {{k: v for k, v in os.environ.items()
                                                if k.startswith("OMPI_")}}}}) + "\\n")
if argv == ["--version"]:
    print("mpirun (Open MPI) 4.1.4 (fake)")
    sys.exit(0)
assert argv[0] == "-np", argv
os.environ["OMPI_COMM_WORLD_SIZE"] = argv[1]
os.execv(argv[2], argv[2:])
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return log


# What sweep.py runs once per sweep before the first point (its probe of --ppbench).
PROBE_CALLS = (["simulate", "--schedule", "naive", "--devices", "1", "--microbatches", "1",
                "--format", "json"], ["--version"])


def calls(log: Path, probes: bool = False) -> list[list[str]]:
    """The fake ppbench's calls, in order; without the sweep's probes unless probes=True."""
    if not log.exists():
        return []
    found = [json.loads(line) for line in log.read_text().splitlines()]
    return found if probes else [c for c in found if c not in PROBE_CALLS]


def result_row(schedule: str, d: int, n: int, bubble: float, closed: float | None,
               cost: str = "F=1,B=2", chunks: int = 1, status: str = "ok", **extra) -> dict:
    """A sweep row shaped like ppbench's JSON plus the fields sweep.py adds."""
    point = {"schedule": schedule, "devices": d, "microbatches": n, "chunks": chunks,
             "group_size": None, "cost": cost, "comm": 0.0}
    if status != "ok":
        return {**point, "sweep": "t", "point": point, "status": status, "error": "not allowed"}
    makespan = 10.0
    row = {"schedule": schedule, "devices": d, "microbatches": n, "chunks": chunks,
           "group_size": 0, "stages": d * chunks, "costs": {"F": 1, "B": 2, "I": 1, "W": 1,
                                                            "FB": 3, "comm": 0},
           "makespan": makespan, "bubble_fraction": bubble, "bubble_ratio": bubble / (1 - bubble),
           "zb_bubble_rate": bubble, "peak_activations": d, "peak_activation_share": 1.0,
           "param_copies": 1,
           "ranks": [{"rank": r, "busy": makespan * (1 - bubble), "idle": makespan * bubble,
                      "span_idle": 0, "peak_activations": d - r,
                      "peak_activation_share": (d - r) / d} for r in range(d)],
           "closed_form": {"bubble_formula": "(D-1)/(D-1+N)", "bubble_fraction": closed,
                           "idle_per_rank": None, "activations_formula": "D-r on rank r",
                           "peak_activations": None, "params": "1x"},
           "provenance": {"ppbench_version": "0.1.0", "git_commit": "c0ffee1", "host": "box",
                          "cpu": "Xeon", "compiler": "g++ 12.2", "date": "2026-11-21T10:00:00Z",
                          "cuda": "not compiled"},
           "sweep": "t", "point": point, "status": "ok", "cost": cost, "comm": 0.0}
    row.update(extra)
    return row


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_row(schedule: str, d: int, n: int, measured: float, predicted: float,
            workload: str = "transformer", flags: str = "--preset tiny-llama",
            measured_bytes: list[float] | None = None, model_bytes: list[float] | None = None,
            closed: float | None = None, status: str = "ok", **extra) -> dict:
    """A `ppbench run` sweep row shaped like ppbench's JSON plus the fields sweep.py adds."""
    point = {"command": "run", "backend": None, "workload": workload, "workload_flags": flags,
             "schedule": schedule, "devices": d, "microbatches": n, "chunks": 1,
             "group_size": None, "microbatch_size": 2, "dtype": "f32", "steps": 3, "warmup": 1,
             "seed": None, "recompute": False}
    if status != "ok":
        return {**point, "sweep": "cpu", "point": point, "status": status,
                "error": "ppbench: error: not allowed"}
    measured_bytes = measured_bytes or [float(1 << 20) * (d - r) for r in range(d)]
    model_bytes = model_bytes or list(measured_bytes)
    row = {"command": "run", "backend": "cpu", "schedule": schedule, "devices": d,
           "microbatches": n, "chunks": 1, "workload": workload, "microbatch_size": 2,
           "dtype": "f32", "steps": 3, "warmup": 1, "step_time_s": 0.5,
           "throughput": {"samples_per_s": 2 * n / 0.5},
           "measured": {"makespan": 0.5, "bubble_fraction": measured},
           "predicted": {"makespan": 0.45, "bubble_fraction": predicted},
           "fidelity": {"bubble_fraction_gap": measured - predicted},
           "activation_bytes": [{"rank": r, "measured_peak_bytes": measured_bytes[r],
                                 "model_peak_bytes": model_bytes[r]} for r in range(d)],
           "loss": 6.4, "grad_norm": 0.66,
           "provenance": {"git_commit": "beef123", "host": "benchbox", "cpu": "EPYC 9999",
                          "cpu_cores": 2, "compiler": "gcc 12", "date": "2026-11-21T06:00:00Z"},
           "sweep": "cpu", "point": point, "status": "ok",
           "closed_form": {"bubble_fraction": closed}, "closed_form_cost": "F=1,B=2"}
    row.update(extra)
    return row
