"""What the MPI benchmarks (mpi_transport.py, allreduce_link.py) share: the environment they
need, their provenance, and their argument types."""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from results_io import atomic_write, git_commit, load_average  # noqa: E402
from script_cli import first_line, number, output_path  # noqa: E402

# OpenMPI refuses to run as root unless told; CI containers run as root.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


class Failure(Exception):
    """A run failed or the environment cannot run the benchmark; .code is the exit code."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mpirun_version(mpirun: str) -> str:
    r = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=60)
    return first_line(r.stdout, "unknown")


def check_environment(ppbench: str) -> str:
    """The mpirun to use; Failure(2) without ppbench, Failure(3) without mpirun or MPI."""
    if not os.path.isfile(ppbench) or not os.access(ppbench, os.X_OK):
        raise Failure(f"--ppbench {ppbench}: no executable ppbench there (build it first: make)", 2)
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise Failure("mpirun not found on PATH: the multi-process runs need OpenMPI "
                      "(Debian: openmpi-bin, installed by make deps)", 3)
    version = subprocess.run([ppbench, "--version"], capture_output=True, text=True, timeout=60)
    if "MPI: compiled in" not in version.stdout:
        raise Failure(f"{ppbench} was built without MPI (its --version does not say 'MPI: "
                      "compiled in'): install libopenmpi-dev and re-run cmake", 3)
    return mpirun


# Option types of the benchmarks' counts (script_cli.number: the value and the range named).
positive = number(int, 1, 1_000_000)
non_negative = number(int, 0, 1_000_000)


def name_list(allowed, noun: str) -> Callable[[str], list[str]]:
    """An argument type: a comma-separated list of names from `allowed`, each at most once."""
    def parse(text: str) -> list[str]:
        values = text.split(",")
        if any(v not in allowed for v in values) or len(set(values)) != len(values):
            raise argparse.ArgumentTypeError(
                f"'{text}': each {noun} once, of {', '.join(allowed)}")
        return values
    return parse


def provenance(mpirun: str) -> dict:
    return {"commit": git_commit(ROOT), "host": socket.gethostname(), "cpu": cpu_model(),
            "cpu_cores": os.cpu_count(), "kernel": platform.release(),
            "load_average_before": load_average(2), "openmpi": mpirun_version(mpirun),
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def record_benchmark(name: str, folder: str, ppbench: str, result: dict,
                     measure: Callable[[str, dict], None], show: Callable[[dict], None],
                     out: Path | None) -> int:
    """A benchmark's main after its options: checks the environment, adds the provenance to
    `result`, has `measure(mpirun, result)` fill it, writes it atomically to `out` (default
    results/perf/<folder>/<commit>.json), then `show`s it. Returns the exit code; a Failure or a
    timeout is one line on stderr, naming the benchmark. A given `out` is checked before any
    measurement (InputError: exit 2 through script_cli.run), not after minutes of it."""
    if out is not None:
        output_path(out, "--out")
    try:
        mpirun = check_environment(ppbench)
        result["provenance"] = provenance(mpirun)
        measure(mpirun, result)
        result["provenance"]["load_average_after"] = load_average(2)
    except Failure as e:
        print(f"{name}: {e}", file=sys.stderr)
        return e.code
    except subprocess.TimeoutExpired as e:
        print(f"{name}: '{' '.join(map(str, e.cmd))}' did not finish in {e.timeout:g} s",
              file=sys.stderr)
        return 1
    commit = result["provenance"]["commit"]
    out = out or ROOT / "results" / "perf" / folder / f"{commit}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, json.dumps(result, indent=1) + "\n")
    show(result)
    print(f"\nrecord: {out} (load average before {result['provenance']['load_average_before']},"
          f" after {result['provenance']['load_average_after']})")
    return 0
