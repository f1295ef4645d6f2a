"""One `ppbench run` of a GPU piece (scripts/gpu_equivalence.py, scripts/gpu_tables.py), timed and
bounded: its exit code, stdout and stderr without the bundle launcher's own lines, or a timeout;
and the command-line pieces the two share (the ppbench command after `--`, a --filter regex).
Plain python3, no third-party modules."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from script_cli import InputError, MachineError, OneLineParser

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
    """The outcome of cmd; MachineError where it cannot be started at all (check_program has
    already said whether it is a program)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Outcome(None, "", f"no result within {timeout:g} s",
                       round(time.monotonic() - t0, 2))
    except OSError as e:
        raise MachineError(f"cannot run {cmd[0]}: {e.strerror or e}") from None
    err = "\n".join(line for line in r.stderr.splitlines()
                    if not line.startswith(LAUNCHER_PREFIX)).strip()
    return Outcome(r.returncode, r.stdout, err, round(time.monotonic() - t0, 2))


def piece_parser(prog: str, description: str) -> OneLineParser:
    """The command line both GPU pieces share: `--out-dir DIR [options] -- PPBENCH_COMMAND...`
    (the piece adds its own options; parse with parse_piece)."""
    ap = OneLineParser(prog=prog, description=description,
                       usage="%(prog)s --out-dir DIR [options] -- PPBENCH_COMMAND...")
    ap.add_argument("--out-dir", type=Path, required=True,
                    help="where the records and the table go (required)")
    return ap


def parse_piece(ap: OneLineParser,
                argv: list[str] | None) -> tuple[list[str], argparse.Namespace]:
    """(the ppbench command after `--`, the options before it); one line and exit 2 where the
    options are bad or no command follows."""
    command, options = split_command(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(options)
    if not command:
        ap.error("give the ppbench command after --, e.g. -- gpu-bundle/run ppbench")
    return command, args


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """`[options...] -- PPBENCH_COMMAND...` as (command, options); the command is empty where
    there is no `--` (the options are parsed first, so that --help and a bad option are answered
    before a missing command is)."""
    if "--" not in argv:
        return [], list(argv)
    split = argv.index("--")
    return argv[split + 1:], argv[:split]


def check_program(command: list[str]) -> None:
    """InputError unless command[0] is a file or a program on PATH (as results_io.ppbench_json
    checks ppbench), MachineError for a file that may not be run: said before any output is
    made, not as a traceback halfway."""
    if not (os.path.isfile(command[0]) or shutil.which(command[0])):
        raise InputError(f"the ppbench command after -- starts with '{command[0]}', which is "
                         "not a program (give e.g. gpu-bundle/run ppbench or build-gpu/ppbench)")
    if os.path.isfile(command[0]) and not os.access(command[0], os.X_OK):
        raise MachineError(f"cannot run {command[0]}: it is not executable")


def regex(text: str) -> re.Pattern:
    """An argparse type: a regular expression, its error named."""
    try:
        return re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"'{text}' is not a regular expression ({e})") from None
