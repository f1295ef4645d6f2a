#!/usr/bin/env python3
"""Run a parameter sweep of `ppbench simulate` and record every point.

SPEC is a JSON file:

    {"name": "theory",
     "runs": [{"schedule": ["gpipe", "1f1b"], "devices": [2, 4, 8],
               "microbatches": [1, 2, 4, 8], "chunks": [2], "group_size": [0],
               "cost": ["F=1,B=2"], "comm": [0]}, ...]}

Each group of "runs" is expanded to the cartesian product of its lists (a scalar counts as a
one-element list; a missing key means ppbench's default). "chunks" and "group_size" are passed
only to schedules that take them (interleaved-1f1b); for the others they are recorded as 1 and 0.

Every point becomes one line of PREFIX.jsonl:
  - exit 0: ppbench's JSON object plus "sweep", "status": "ok", "cost", "comm" and "point"
  - exit 2: {"status": "invalid", "error": <ppbench's one-line message>, ...point}
  - else:   {"status": "error", "error": ..., ...point}  (crash, timeout, unparseable output)

Points already recorded in PREFIX.jsonl with status ok or invalid are skipped (key: schedule,
devices, microbatches, chunks, group_size, cost, comm); "error" rows are retried and replaced,
and --force re-runs everything. PREFIX.jsonl is rewritten atomically after every point (temp
file in the same directory, then os.replace), and PREFIX.csv is regenerated from it the same way.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

# Schedules that take --chunks / --group-size (see `ppbench list`).
CHUNKED_SCHEDULES = frozenset({"interleaved-1f1b"})

SPEC_KEYS = ("schedule", "devices", "microbatches", "chunks", "group_size", "cost", "comm")

CSV_COLUMNS = (
    "schedule", "devices", "microbatches", "chunks", "group_size", "cost", "comm", "status",
    "makespan", "bubble_fraction", "bubble_ratio", "zb_bubble_rate", "peak_activations",
    "peak_activation_share", "closed_form_bubble_fraction", "closed_form_idle_per_rank",
    "git_commit", "date",
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

    def key(self) -> tuple:
        return (self.schedule, self.devices, self.microbatches, self.chunks, self.group_size,
                self.cost, self.comm)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in SPEC_KEYS}

    def argv(self) -> list[str]:
        args = ["simulate", "--schedule", self.schedule, "--devices", str(self.devices),
                "--microbatches", str(self.microbatches)]
        if self.schedule in CHUNKED_SCHEDULES:
            if self.chunks is not None:
                args += ["--chunks", str(self.chunks)]
            if self.group_size:
                args += ["--group-size", str(self.group_size)]
        if self.cost:
            args += ["--cost", self.cost]
        if self.comm is not None:
            args += ["--comm", format_number(self.comm)]
        return args + ["--format", "json"]

    def label(self) -> str:
        text = f"{self.schedule} D={self.devices} N={self.microbatches}"
        if self.schedule in CHUNKED_SCHEDULES:
            if self.chunks is not None:
                text += f" v={self.chunks}"
            if self.group_size:
                text += f" g={self.group_size}"
        if self.cost:
            text += f" cost={self.cost}"
        if self.comm:
            text += f" comm={format_number(self.comm)}"
        return text


def format_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def make_point(schedule: str, devices: int, microbatches: int, chunks: int | None = None,
               group_size: int | None = None, cost: str | None = None,
               comm: float | None = None) -> Point:
    """Normalize a point so that equivalent requests share one key."""
    if schedule in CHUNKED_SCHEDULES:
        group_size = group_size or None
    else:
        chunks, group_size = 1, None
    return Point(schedule=str(schedule), devices=int(devices), microbatches=int(microbatches),
                 chunks=None if chunks is None else int(chunks), group_size=group_size,
                 cost=cost or "", comm=None if comm is None else float(comm))


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def expand_spec(spec: dict) -> list[Point]:
    """The cartesian product of every group, in order, without duplicates."""
    if not isinstance(spec.get("runs"), list):
        raise ValueError("spec needs a 'runs' list of parameter groups")
    points: dict[tuple, Point] = {}
    for i, group in enumerate(spec["runs"]):
        unknown = set(group) - set(SPEC_KEYS)
        if unknown:
            raise ValueError(f"runs[{i}]: unknown keys {sorted(unknown)} (known: {SPEC_KEYS})")
        for required in ("schedule", "devices", "microbatches"):
            if required not in group:
                raise ValueError(f"runs[{i}]: missing '{required}'")
        lists = [as_list(group.get(k)) for k in SPEC_KEYS]
        for values in itertools.product(*lists):
            point = make_point(**dict(zip(SPEC_KEYS, values)))
            points.setdefault(point.key(), point)
    return list(points.values())


def row_key(row: dict) -> tuple | None:
    """The key of a recorded row: its requested point, as written by this script."""
    point = row.get("point")
    if not isinstance(point, dict):
        point = row  # a row written by another tool: use its top-level fields
    try:
        return make_point(**{k: point.get(k) for k in SPEC_KEYS}).key()
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
    if proc.returncode == 2:
        return failed_row(point, base, "invalid", stderr[0] if stderr else "invalid parameters")
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
    row.update({"status": "ok", "cost": point.cost, "comm": point.comm})
    return row


def failed_row(point: Point, base: dict, status: str, error: str) -> dict:
    row = point.as_dict()
    row.update(base)
    row.update({"status": status, "error": error})
    return row


def file_mode(path: Path) -> int:
    """The mode of the existing file, else what a plain open() would give under the umask."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write(path: Path, text: str) -> None:
    """Write text to path so that readers see either the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, file_mode(path))  # mkstemp makes 0600; keep the usual permissions
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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


def write_csv(path: Path, rows: Iterable[dict]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(csv_row(row))
    atomic_write(path, buf.getvalue())


def describe(row: dict) -> str:
    if row["status"] == "ok":
        bubble = row.get("bubble_fraction")
        return f"bubble {bubble:.4f}" if isinstance(bubble, (int, float)) else "ok"
    return f"{row['status']}: {row.get('error', '')}"


def run_sweep(spec_path: Path, ppbench: str, prefix: Path, force: bool = False,
              timeout: float = 600.0) -> dict[str, int]:
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    name = spec.get("name") or spec_path.stem
    points = expand_spec(spec)
    records = Records(prefix.with_name(prefix.name + ".jsonl"))
    todo = [p for p in points if force or records.status(p) not in ("ok", "invalid")]
    counts = {"ok": 0, "invalid": 0, "error": 0, "skipped": len(points) - len(todo)}
    print(f"sweep '{name}': {len(points)} points, {counts['skipped']} already recorded in "
          f"{records.path}, {len(todo)} to run", flush=True)
    for i, point in enumerate(todo, 1):
        row = run_point(ppbench, point, name, timeout)
        records.put(point, row)
        counts[row["status"]] += 1
        print(f"[{i}/{len(todo)}] {point.label()} ... {describe(row)}", flush=True)
    write_csv(prefix.with_name(prefix.name + ".csv"), records.rows())
    print(f"sweep '{name}': {counts['ok']} ok, {counts['invalid']} invalid, {counts['error']} "
          f"error, {counts['skipped']} skipped -> {records.path}", flush=True)
    return counts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run `ppbench simulate` over the cartesian product of a sweep spec and "
                    "record each point in PREFIX.jsonl and PREFIX.csv.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", type=Path, help="sweep spec (JSON), e.g. benchmarks/sweeps/theory.json")
    parser.add_argument("--ppbench", default="build/ppbench", help="ppbench binary (default: %(default)s)")
    parser.add_argument("--out", required=True, type=Path,
                        help="output prefix: writes PREFIX.jsonl and PREFIX.csv")
    parser.add_argument("--force", action="store_true", help="re-run points already recorded")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds allowed per point (default: %(default)s)")
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
