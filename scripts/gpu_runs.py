"""One `ppbench run` of a GPU piece (scripts/gpu_equivalence.py, scripts/gpu_tables.py), timed and
bounded: its exit code, stdout and stderr without the bundle launcher's own lines, or a timeout.
Plain python3, no third-party modules."""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass

# What the bundle's launcher (gpu-bundle/run) prints on stderr about the libraries it found.
LAUNCHER_PREFIX = "gpu-bundle:"


@dataclass
class Outcome:
    rc: int | None  # None: stopped at the time limit
    stdout: str
    error: str  # stderr without the launcher's lines; for a timeout, what happened
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.rc is None


def run_timed(cmd: list[str], timeout: float) -> Outcome:
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Outcome(None, "", f"no result within {timeout:g} s",
                       round(time.monotonic() - t0, 2))
    err = "\n".join(line for line in r.stderr.splitlines()
                    if not line.startswith(LAUNCHER_PREFIX)).strip()
    return Outcome(r.returncode, r.stdout, err, round(time.monotonic() - t0, 2))


def split_command(argv: list[str], prog: str) -> tuple[list[str], list[str]] | None:
    """`[options...] -- PPBENCH_COMMAND...` as (command, options); None (with one line on
    stderr) when there is no command after `--`."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print(f"{prog}: give the ppbench command after --", file=sys.stderr)
        return None
    split = argv.index("--")
    return argv[split + 1:], argv[:split]
