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
rank). Where mpirun is not on PATH the points under mpirun are skipped with one note line and the
rest runs (the points of the same group in threads too); a ppbench built without MPI refuses a
sweep with points under mpirun before any point runs (one line, exit 3). "gpus":
true (cuda only) puts rank k on GPU k (`--gpus 0,...,D-1`, NCCL in one process). A group's
"min_gpus" K runs it only where `nvidia-smi -L` lists at least K GPUs (skipped with one note line
elsewhere). It starts
mpirun with OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) set, and with OMPI_MCA_rmaps_base_oversubscribe=1
only where P exceeds the machine's cores. "chunks" is passed only to
schedules that take it (interleaved-1f1b, looped-bfs, interleaved-zb) and "group_size" only to
interleaved-1f1b; for the others they are recorded as 1 and 0. The
spec's optional "timeout" is the seconds allowed per point (--timeout overrides it).

Before anything runs, the spec is checked against the schema (a problem is one line naming the
file, the group by index and name, the key and what is allowed; exit 2), where PREFIX.jsonl
goes is checked (a folder that cannot be written is exit 2) and --ppbench is probed: a path
that does not exist is exit 2, one that exists but cannot run is exit 3.

Every point becomes one line appended to PREFIX.jsonl (results_io.append_jsonl: one write under
an fcntl.flock):
  - exit 0: ppbench's JSON object plus "sweep", "status": "ok", "point" (and for simulate
    points "cost", "comm"; for run points "closed_form": the closed form of the same
    schedule, D, N, v from `ppbench simulate --cost F=1,B=2`, null where none applies)
  - exit 2: {"status": "invalid", "error": <ppbench's one-line message>, ...point}
  - exit 3: {"status": "error", ...}: the machine, not the point (no CUDA device visible, a
    ppbench built without CUDA, a library missing); retried on the next sweep
  - else:   {"status": "error", "error": ..., ...point}  (crash, timeout, unparseable output)
The exit code decides, never the message. A row without ppbench's record (invalid, error) has
"date" (UTC) in place of its provenance, and its CSV row takes commit, host and CPU from
"recorded_by". Every row also carries "recorded_by": the ppbench
that made it (git commit as ppbench reports it, "-dirty" included, and the sha256 of the binary
with the programs beside it that run CUDA and mpirun points) and the machine (host, CPU model and
cores, GPU model).

--only KEY=V1,V2 runs a subset: the spec's points whose KEY takes one of the values (given
again for another key, a point must match each; keys schedule, devices, microbatches, chunks,
workload, dtype, microbatch_size, backend), e.g. `--only microbatches=1,4,32`. They are the same
points the whole spec has, so a later whole sweep skips them. A value no point of the spec has is
a bad option (exit 2, one line naming it and the values the spec has).

Resume: a point is skipped when PREFIX.jsonl holds an ok or invalid row of it whose
"recorded_by" equals this sweep's: the same machine and the same ppbench (commit and binary).
Rows of another machine, commit or build are never taken for this one: at the start they are
added to the end of PREFIX.previous.jsonl (what earlier sweeps set aside stays there; a line it
holds already is not written again) and their points run again. "error" rows are retried, and
--force re-runs everything. A re-run point is appended again; the later
line stands (results_io.latest_rows), and the file is compacted when the sweep ends. An error
never takes the place of a measurement: a re-run that fails where an ok or invalid row is
recorded leaves that row standing and adds its error row to PREFIX.previous.jsonl.

PREFIX.csv follows every recorded point, so it always holds the same points as PREFIX.jsonl: a
new point's row is appended (one locked write, undone should it fail), anything else (a point
run again, the first row of a kind, the start of a sweep) rewrites it atomically. Simulate rows
go in the simulate columns, run rows in the run columns (step time, throughput, measured and
predicted bubble, gap, loss, grad norm, peak bytes, and for GPU runs the GPU, the placement, the
SMs of each rank's partition, whether the driver granted them as requested, and the transport).
When one file holds both kinds, the run rows go to PREFIX-run.csv, which is removed when it does
not. PREFIX.summary.json records what this sweep did (see --summarize).

Ctrl-C (SIGINT), SIGTERM or SIGHUP: the running point's processes are ended (SIGTERM, a few seconds,
then SIGKILL to every process of its session, mpirun's ranks included) and that point is not
recorded; every line already in PREFIX.jsonl is whole and PREFIX.csv matches it; one line
"sweep: interrupted after K of M points; records in PREFIX.jsonl" and exit 130 (SIGINT),
143 (SIGTERM) or 129 (SIGHUP). The next sweep resumes there.

Exit codes: 0 done (--fail-on-error: 1 if a point run failed); 2 a bad spec or
option, an --out PREFIX that cannot be written, or no ppbench at --ppbench; 3 a machine problem
(ppbench cannot run, jsonschema is not installed, another sweep is writing PREFIX, points under
mpirun with a ppbench built without MPI); 1 ppbench failed its probe; 130/143/129 interrupted.

Progress: one line per point, "[i/n] <point> ... <outcome> (<seconds> s)"; GPU rows also name
the partitions they ran on ("4x32 SMs").

--summarize PREFIX... prints what the last sweep into each PREFIX did (from PREFIX.summary.json):
points measured, skipped, invalid and errors, the machine and the commit, and with --report and
--figures where those are (`make bench` ends with it); a PREFIX without a summary, or with a file
there that is not one, is "not run" and says which.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from results_io import EXIT_MACHINE, atomic_write
from script_cli import OneLineParser, ScriptError, output_path, run, say, shown
from sweep_point import MPIRUN, Point
from sweep_process import (MPI_VERSION_LINE, STOP, Stopped, mpi_missing_beside, probe,
                           run_point, stop_signals, visible_gpu_count)
from sweep_records import (OUTPUT_SUFFIXES, STANDING, Records, describe, machine_text,
                           prefix_file, who_text)
from sweep_spec import (ONLY_KEYS, MachineError, SpecError, as_list, expand_spec, group_text,
                        load_spec, matches, only_text, parse_only, positive_finite, select_points)

DEFAULT_TIMEOUT = 600.0


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP stopped the sweep after `done` of `total` points."""

    def __init__(self, signum: int, done: int, total: int, records: Path):
        super().__init__(f"interrupted after {done} of {total} points; records in {records}")
        self.signum, self.done, self.total, self.records = signum, done, total, records


def groups_to_skip(spec: dict) -> tuple[set[int], list[str]]:
    """The groups whose "min_gpus" exceeds the GPUs nvidia-smi lists, and a note line naming
    them, so that the rest of the sweep still runs."""
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
    notes = []
    if few_gpus:
        listed = f"{gpus} GPU{'' if gpus == 1 else 's'}"
        notes.append(f"nvidia-smi lists {listed}: skipping {', '.join(few_gpus)} (\"min_gpus\")")
    return skip, notes


def mpirun_groups(spec: dict, points: list[Point], skip: set[int],
                  only: dict[str, set]) -> list[str]:
    """The groups (not in skip) that give points under mpirun among `points`: "runs[3] (\"m\")",
    or "the mpirun points of runs[3] (\"m\")" where the group runs other points in threads."""
    wanted = {p.key() for p in points if p.launcher == MPIRUN}
    named = []
    for i, group in enumerate(spec.get("runs") or []):
        if i in skip or not isinstance(group, dict) or \
                MPIRUN not in as_list(group.get("launcher")):
            continue
        own = [p for p in expand_spec({"runs": [group]}) if matches(p, only)]
        mine = [p for p in own if p.key() in wanted]
        if mine:
            text = group_text(i, group)
            named.append(text if len(mine) == len(own) else f"the mpirun points of {text}")
    return named


def mpirun_points(spec: dict, spec_path: Path, points: list[Point], skip: set[int],
                  only: dict[str, set], recorded_by: dict) -> tuple[list[Point], list[str]]:
    """The points this machine runs, and a note: a point under mpirun where there is no
    mpirun on PATH is left out, with one note line naming its groups; the points in threads
    run, those of the same groups included. Points under mpirun with mpirun present but a
    ppbench built without MPI are a MachineError (exit 3, one line naming their groups): that
    ppbench is the wrong build for those points, not a machine without MPI."""
    if not any(p.launcher == MPIRUN for p in points):
        return points, []
    groups = ", ".join(mpirun_groups(spec, points, skip, only))
    if shutil.which(MPIRUN) is None:
        return [p for p in points if p.launcher != MPIRUN], [
            f"no mpirun on PATH (Debian: openmpi-bin; make deps installs it): skipping "
            f"{groups} (\"launcher\": \"mpirun\")"]
    if not recorded_by.get("mpi"):
        ppbench = str(recorded_by.get("ppbench"))
        if mpi_missing_beside(ppbench):
            beside = Path(ppbench).with_name("ppbench-mpi")
            raise MachineError(f"{spec_path}: {groups}: \"launcher\": \"mpirun\" needs "
                               f"ppbench-mpi beside {ppbench}, and {beside} is missing: copy "
                               f"ppbench-mpi from the build folder there")
        raise MachineError(f"{spec_path}: {groups}: \"launcher\": \"mpirun\" needs a ppbench "
                           f"built with MPI and {recorded_by.get('ppbench')} was not (its "
                           f"--version lacks '{MPI_VERSION_LINE}': install libopenmpi-dev, "
                           f"re-run cmake)")
    return points, []


@contextmanager
def prefix_lock(prefix: Path) -> Iterator[None]:
    """One sweep at a time per PREFIX: an exclusive flock on PREFIX.jsonl.lock while it runs."""
    import fcntl
    lock = prefix_file(prefix, ".jsonl.lock")
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
              timeout: float | None = None,
              only: dict[str, set] | None = None) -> dict[str, int]:
    """Check the spec and ppbench, run the points not yet recorded, return the counts.
    With `only` (parse_only's), just the points it selects.

    Raises SpecError (2), PpbenchError (its code), MachineError (3) before any point runs, and
    Interrupted after a stop signal (every record written is whole, PREFIX.csv matches).
    """
    with stop_signals():
        spec, points = load_spec(spec_path)
        whole = len(points)
        if only:
            points = select_points(points, only, str(spec_path))
        name = spec.get("name") or spec_path.stem
        if timeout is None:
            timeout = positive_finite(spec.get("timeout", DEFAULT_TIMEOUT),
                                      f"{spec_path}: timeout")
        else:
            timeout = positive_finite(timeout, "--timeout")
        # Where the records go, checked before ppbench is probed or any point runs: an
        # unwritable PREFIX, or a folder where one of its files goes, is the caller's to fix
        # (InputError, exit 2), named as --out; found only when written, it would be exit 3
        # with a raw errno line, for PREFIX.summary.json after every point ran.
        for suffix in OUTPUT_SUFFIXES:
            output_path(prefix_file(prefix, suffix), "--out")
        try:
            recorded_by = probe(str(ppbench))
        except Stopped:
            raise Interrupted(STOP.signum or signal.SIGINT, 0, len(points),
                              prefix_file(prefix, ".jsonl")) from None
        skip, notes = groups_to_skip(spec)
        if skip:
            kept = [g for i, g in enumerate(spec["runs"]) if i not in skip]
            points = expand_spec({**spec, "runs": kept}) if kept else []
            points = [p for p in points if matches(p, only or {})]
        points, mpirun_notes = mpirun_points(spec, spec_path, points, skip, only or {},
                                             recorded_by)
        notes = mpirun_notes + notes
        if only:
            notes.append(f"--only {only_text(only)}: {len(points)} of the spec's {whole} points")
        with prefix_lock(prefix):
            return sweep_points(spec_path, name, points, ppbench, prefix, force, timeout,
                                recorded_by, notes)


def sweep_points(spec_path: Path, name: str, points: list[Point], ppbench: str, prefix: Path,
                 force: bool, timeout: float, recorded_by: dict,
                 notes: Iterable[str] = ()) -> dict[str, int]:
    records = Records(prefix, recorded_by)
    set_aside = records.settle()
    todo = [p for p in points if force or records.status(p) not in STANDING]
    counts = {"ok": 0, "invalid": 0, "error": 0, "skipped": len(points) - len(todo)}
    say_line(f"sweep '{name}': {who_text(recorded_by)}")
    for note in notes:
        say_line(f"sweep '{name}': note: {note}")
    if set_aside:
        say_line(f"sweep '{name}': {set_aside}")
    say_line(f"sweep '{name}': {len(points)} points, {counts['skipped']} already recorded in "
             f"{records.path} by this ppbench on this machine, {len(todo)} to run")
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
            kept = "" if records.put(point, row) else (
                f"; the recorded {records.status(point)} row stands, this one is in "
                f"{records.previous_path}")
            done += 1
            counts[row["status"]] += 1
            say_line(f"[{i}/{len(todo)}] {point.label()} ... {describe(row)}{kept} "
                     f"({time.monotonic() - start:.1f} s)")
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
    say_line(f"sweep '{name}': {counts['ok']} ok, {counts['invalid']} invalid, {counts['error']} "
             f"error, {counts['skipped']} skipped -> {records.path}")
    return counts


def say_line(line: str) -> None:
    """One progress line on stdout, at once; what a name or a point's message holds that a
    terminal would act on (ESC) or UTF-8 cannot write (a lone surrogate of a file name that is
    not UTF-8) escaped."""
    print(shown(line), flush=True)


def summary_path(prefix: Path) -> Path:
    return prefix_file(prefix, ".summary.json")


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
    unread: dict[Path, str] = {}  # why a prefix has no summary to show
    for prefix in prefixes:
        path = summary_path(prefix)
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            summary, unread[prefix] = None, f"no {path}"
        except (OSError, ValueError, RecursionError):
            summary = None
        if not isinstance(summary, dict):
            # Unreadable or of another shape: as good as none, and said so; `make bench` still
            # ends with the lines of the other sweeps.
            unread.setdefault(prefix, f"{path} is not a summary this sweep wrote")
            summary = None
        summaries.append((prefix, summary))
    by = [s["recorded_by"] for _, s in summaries if s and isinstance(s.get("recorded_by"), dict)]
    lines = ["bench summary:"]
    if by:
        commits = sorted({str(b.get("git_commit")) for b in by})
        machines = list(dict.fromkeys(machine_text(b) for b in by))
        lines.append(f"  ppbench at commit {', '.join(commits)} on {'; '.join(machines)}")
    for prefix, s in summaries:
        if s is None:
            lines.append(f"  {prefix.name}: not run ({unread[prefix]})")
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


def timeout_arg(text: str) -> float:
    try:
        return positive_finite(text, "--timeout")
    except SpecError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def prefix_arg(text: str) -> Path:
    """--out PREFIX: a name that files can be named after. Path() would turn 'dir/' into 'dir'
    (and write dir.jsonl beside the folder) and '' into '.', so the text itself is checked: its
    last part must be a name, not empty ('', '/', 'dir/'), '.' or '..'."""
    last = text.rsplit("/", 1)[-1]
    if last in ("", ".", ".."):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a prefix; allowed: a path whose last part is a file name, not "
            f"empty, '.' or '..' and without a trailing '/' (e.g. results/theory writes "
            f"results/theory.jsonl)")
    return Path(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="sweep",
        description="Run `ppbench simulate` or `ppbench run` over the cartesian product of a "
                    "sweep spec and record each point in PREFIX.jsonl and PREFIX.csv.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", type=Path, nargs="?",
                        help="sweep spec (JSON, benchmarks/sweeps/sweep.schema.json), e.g. "
                             "benchmarks/sweeps/theory.json")
    parser.add_argument("--ppbench", default="build/ppbench",
                        help="ppbench binary (default: %(default)s)")
    parser.add_argument("--out", type=prefix_arg,
                        help="output prefix: writes PREFIX.jsonl and PREFIX.csv")
    parser.add_argument("--force", action="store_true", help="re-run points already recorded")
    parser.add_argument("--only", action="append", default=[], metavar="KEY=V1,V2",
                        help="run only the spec's points whose KEY is one of the values (again "
                             f"for another key; keys: {', '.join(ONLY_KEYS)}), e.g. "
                             "--only microbatches=1,4,32")
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
    try:
        args.only = parse_only(args.only)
    except SpecError as e:
        parser.error(str(e))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.summarize is not None:
        for line in summarize(args.summarize, args.report, args.figures):
            print(shown(line))
        return 0
    try:
        counts = run_sweep(args.spec, args.ppbench, args.out, args.force, args.timeout,
                           args.only)
    except ScriptError as e:
        # Each carries its exit status: SpecError and an unreadable records file or unwritable
        # --out 2, PpbenchError its own (2, 3 or 1), MachineError 3.
        say("sweep", str(e))
        return e.code
    except Interrupted as e:
        say("sweep", str(e))
        sys.stderr.flush()
        return 128 + e.signum
    except OSError as e:
        say("sweep", str(e))
        return EXIT_MACHINE
    return 1 if args.fail_on_error and counts["error"] else 0


if __name__ == "__main__":
    sys.exit(run("sweep", main))
