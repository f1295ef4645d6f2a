#!/usr/bin/env python3
"""Take apart what cuda_pipeline_bench kept on a GPU machine (gpu-check's benchmarks piece,
`kept/` in its tarball; PPBENCH_BENCH_KEEP_DIR): two figures the benchmark reports only as a
number, broken down.

- The compute slowdown of BM_Scaling (the same work taking longer on a partition while the
  others run beside it): for each op kind, the pipelined run's per-micro-batch time summed over
  its stages (scaling-1f1b-D<D>-N<N>.profile.json) against the same op on one partition of the
  same SMs alone (scaling-one-partition-of-D<D>-1f1b-D1-N<N>.profile.json). Both are per-op
  means, so an op whose ratio stands out is what sharing the GPU slows.
- The gap between the measured and the replayed bubble of BM_Fidelity
  (fidelity-<schedule>-D<D>-N<N>.record.json): by rank, how much longer it stood idle than the
  replay of the same step's costs says, and whether that came before its first action, after
  its last, or between. The rank with the most extra idle is where to look in the trace kept
  beside the record.

Usage: kept_runs.py FOLDER [--out FILE]
  FOLDER: a kept/ folder, or any folder above one (an unpacked tarball); searched recursively.
Prints the two tables as Markdown (and writes them to --out); a slowdown is "—" where the op
took no measurable time alone (0 s).
Exit: 0 done; 1 nothing kept was found; 2 bad usage, a file of the wrong shape or an --out that
cannot be written.
Plain python3, no third-party modules.
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from results_io import atomic_write
from script_cli import InputError, OneLineParser, output_path, read_json, run, say, shaped

PIPELINED = re.compile(r"scaling-1f1b-D(\d+)-N(\d+)\.profile\.json")
# F and B per micro-batch, then each stage's optimizer step (once per step, where it ran).
OPS = ("F", "B", "optimizer")
DASH = "—"  # a cell with no value: the report's own dash (report_format.DASH)


def slowdown_rows(folder: Path) -> list[list[str]]:
    rows = []
    for path in sorted(folder.rglob("scaling-1f1b-D*-N*.profile.json")):
        m = PIPELINED.fullmatch(path.name)
        if not m:
            continue
        d, n = m.groups()
        alone_path = path.with_name(f"scaling-one-partition-of-D{d}-1f1b-D1-N{n}.profile.json")
        if not alone_path.is_file():
            say("kept_runs", f"{path}: no {alone_path.name} beside it; left out")
            continue
        piped, alone = read_json(path, "profile"), read_json(alone_path, "profile")
        with shaped(f"profiles {path} and {alone_path.name}"):
            stages, one = piped["stages"], alone["stages"][0]
            for op in OPS:
                if op not in one or not all(op in s for s in stages):
                    continue
                times = [(alone_path, seconds(one[op], alone_path, op))]
                times += [(path, seconds(s[op], path, op)) for s in stages]
                total, by_itself = sum(t for _, t in times[1:]), times[0][1]
                # An op that took no measurable time alone has no slowdown to give.
                ratio = f"{total / by_itself:.2f}" if by_itself > 0 else DASH
                rows.append([d, n, op, f"{1e3 * total:.3f}", f"{1e3 * by_itself:.3f}", ratio])
    return rows


def seconds(value: object, path: Path, op: str) -> float:
    """A profile's per-op time: a finite number of seconds >= 0 (InputError naming the file and
    the op: a NaN, an infinity or a negative time is no time)."""
    t = float(value)  # type: ignore[arg-type]
    if not math.isfinite(t) or t < 0:
        raise InputError(f"profile {path}: its {op} time is {value!r}; allowed: a finite number "
                         "of seconds >= 0")
    return t


def gap_rows(folder: Path) -> list[list[str]]:
    rows = []
    for path in sorted(folder.rglob("fidelity-*.record.json")):
        record = read_json(path, "record")
        with shaped(f"record {path}"):
            measured, replayed = record["measured"], record["predicted"]
            extra = []  # (extra idle, rank, before its first action, after its last) in seconds
            # Times from each timeline's own first start, so that the measured trace's offset
            # (the step's host start) does not count as idle; the replay starts at 0.
            zero = min(float(r["first_start"]) for r in measured["ranks"])
            for m, p in zip(measured["ranks"], replayed["ranks"]):
                before = float(m["first_start"]) - zero - float(p["first_start"])
                after = ((float(measured["makespan"]) - (float(m["last_end"]) - zero))
                         - (float(replayed["makespan"]) - float(p["last_end"])))
                extra.append((float(m["idle"]) - float(p["idle"]), int(m["rank"]), before, after))
            worst = max(extra)
            gap = 100 * (float(measured["bubble_fraction"]) - float(replayed["bubble_fraction"]))
            rows.append([str(record["schedule"]), str(record["devices"]),
                         str(record["microbatches"]),
                         f"{float(measured['bubble_fraction']):.3f}",
                         f"{float(replayed['bubble_fraction']):.3f}", f"{gap:+.1f}",
                         f"{worst[1]}", signed_ms(worst[0]), signed_ms(worst[2]),
                         signed_ms(worst[3]),
                         " ".join(f"r{r} {signed_ms(e, 2)}" for e, r, _, _ in extra)])
    return rows


def signed_ms(seconds: float, digits: int = 3) -> str:
    """Milliseconds with their sign, a rounding error's -0.000 written +0.000."""
    return f"{round(1e3 * seconds, digits) + 0.0:+.{digits}f}"


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="kept_runs", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a kept/ folder or any folder above one")
    parser.add_argument("--out", type=Path, help="also write the tables (Markdown) here")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder}: not a folder")
    out = output_path(args.out) if args.out else None
    slow, gaps = slowdown_rows(args.folder), gap_rows(args.folder)
    if not slow and not gaps:
        say("kept_runs", f"nothing kept by cuda_pipeline_bench under {args.folder}")
        return 1
    text = "\n\n".join([
        "## Compute slowdown while the partitions share the GPU (BM_Scaling)",
        "Per micro-batch (optimizer: per step), ms: the pipelined run's op summed over its "
        "stages, against the same op on one partition of the same SMs alone.",
        table(["D", "N", "op", "pipelined, all stages", "one partition alone", "slowdown"],
              slow) if slow else "(no scaling runs kept)",
        "## Measured against replayed bubble, by rank (BM_Fidelity)",
        "Extra idle: the rank's idle time measured less its idle in the replay of the same "
        "step's costs (ms); before/after: of it, how much before its first action and after "
        "its last (the rest lies between its actions).",
        table(["schedule", "D", "N", "measured", "replayed", "gap (points)", "rank with most",
               "its extra idle", "before first", "after last", "every rank"], gaps)
        if gaps else "(no fidelity runs kept)",
    ]) + "\n"
    print(text, end="")
    if out:
        atomic_write(out, text)
    return 0


if __name__ == "__main__":
    sys.exit(run("kept_runs", main))
