#!/usr/bin/env python3
"""Compare two Google Benchmark JSON outputs and flag performance regressions.

    scripts/compare_perf.py BASELINE.json LATEST.json [--threshold 0.10] [--warn-only]

Benchmarks are matched by name, with Google Benchmark's option suffixes
(/min_time:0.200, /iterations:1, /real_time, ...) dropped, so changing how long
a point runs does not unmatch it. Each benchmark is compared on its
actions_per_second counter when both sides have it (higher is better), else on
real_time (lower is better, converted to a common unit).

The printed `speedup` is latest speed / baseline speed: above 1 is faster. A
benchmark is a REGRESSION when speedup < 1 - threshold, an improvement when
speedup > 1 + threshold; one that ran in the baseline but errors in the latest
run (e.g. a generator that now throws) counts as a regression too.

Exit status: 1 if any regression (0 with --warn-only); 0 when the baseline file
does not exist, after saying how to create it; 2 when a file cannot be read.
The last line is the summary:
    perf: 42 compared, 0 regressions, 3 improvements (threshold 10%)

Timings only compare on the same machine: both runs' contexts (CPU model, CPU
count, build type) are printed, with a warning when they differ.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

RATE_COUNTER = "actions_per_second"

# Path components Google Benchmark appends for run options, not identity.
_OPTION_PART = re.compile(
    r"^(min_time|min_warmup_time|iterations|repeats|threads):[^/]*$"
    r"|^(real_time|manual_time|process_time)$"
)

_NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# Context keys that decide whether two runs are comparable at all.
_CONTEXT_KEYS = ("cpu_model", "num_cpus", "mhz_per_cpu", "ppbench_build_type",
                 "library_build_type", "host_name", "date")
_MUST_MATCH = ("cpu_model", "num_cpus", "ppbench_build_type")


@dataclass
class Result:
    """One benchmark of one run: a speed figure, or the error that stopped it."""

    value: float | None  # actions/s if rate else nanoseconds
    rate: bool  # True: actions/s (higher is better); False: real time in ns
    error: str | None = None
    real_time_ns: float | None = None


def normalize_name(name: str) -> str:
    return "/".join(p for p in name.split("/") if not _OPTION_PART.match(p))


def load(path: Path) -> tuple[dict, dict[str, Result]]:
    """Returns the run's context and its results by normalized name.

    Repetitions of one benchmark (--benchmark_repetitions) are reduced to their
    median; aggregate rows (mean, stddev, ...) are ignored for that reason.
    """
    data = json.loads(path.read_text())
    runs: dict[str, list[dict]] = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        name = normalize_name(b.get("run_name") or b["name"])
        runs.setdefault(name, []).append(b)

    results: dict[str, Result] = {}
    for name, rows in runs.items():
        errors = [r for r in rows if r.get("error_occurred")]
        if errors:
            results[name] = Result(None, False, errors[0].get("error_message", "error"))
            continue
        times = [r["real_time"] * _NS_PER_UNIT[r.get("time_unit", "ns")] for r in rows]
        rates = [r[RATE_COUNTER] for r in rows if RATE_COUNTER in r]
        real_time = statistics.median(times)
        if len(rates) == len(rows) and all(x > 0 for x in rates):
            results[name] = Result(statistics.median(rates), True, None, real_time)
        else:
            results[name] = Result(real_time, False, None, real_time)
    return data.get("context", {}), results


def speedup(base: Result, latest: Result) -> float:
    """Latest speed over baseline speed, on the figure both sides have."""
    if base.rate and latest.rate:
        return latest.value / base.value
    # Fall back to time when one side lacks the counter.
    return base.real_time_ns / latest.real_time_ns


def fmt(r: Result | None, as_rate: bool) -> str:
    if r is None:
        return "-"
    if r.error is not None:
        return "error"
    if as_rate:
        return f"{r.value / 1e6:.3f}M/s"
    ns = r.real_time_ns
    for unit in ("s", "ms", "us"):
        if ns >= _NS_PER_UNIT[unit]:
            return f"{ns / _NS_PER_UNIT[unit]:.3f}{unit}"
    return f"{ns:.1f}ns"


def print_contexts(base_ctx: dict, latest_ctx: dict) -> None:
    for label, ctx in (("baseline", base_ctx), ("latest", latest_ctx)):
        shown = ", ".join(f"{k}={ctx[k]}" for k in _CONTEXT_KEYS if k in ctx)
        print(f"{label} context: {shown or '(none)'}")
    for key in _MUST_MATCH:
        if base_ctx.get(key) != latest_ctx.get(key):
            print(f"WARNING: {key} differs (baseline {base_ctx.get(key)!r}, latest "
                  f"{latest_ctx.get(key)!r}): timings from different machines or builds "
                  "are not comparable")
    for label, ctx in (("baseline", base_ctx), ("latest", latest_ctx)):
        if str(ctx.get("ppbench_build_type", "release")).startswith("debug"):
            print(f"WARNING: the {label} run is a debug build")


def compare(base: dict[str, Result], latest: dict[str, Result], threshold: float,
            out=sys.stdout) -> tuple[int, int, int]:
    """Prints the table; returns (compared, regressions, improvements)."""
    names = sorted(set(base) | set(latest))
    width = max([len(n) for n in names] + [9])
    print(f"{'benchmark':<{width}}  {'baseline':>12}  {'latest':>12}  {'speedup':>8}",
          file=out)
    compared = regressions = improvements = 0
    for name in names:
        b, lt = base.get(name), latest.get(name)
        as_rate = bool(b and lt and b.rate and lt.rate)
        row = f"{name:<{width}}  {fmt(b, as_rate):>12}  {fmt(lt, as_rate):>12}"
        if b is None:
            print(f"{row}  {'':>8}  (new: not in baseline)", file=out)
        elif lt is None:
            print(f"{row}  {'':>8}  (missing from latest)", file=out)
        elif b.error is not None:
            note = "(errored in baseline)" if lt.error is not None else "(new: baseline errored)"
            print(f"{row}  {'':>8}  {note}", file=out)
        elif lt.error is not None:
            compared += 1
            regressions += 1
            print(f"{row}  {'':>8}  REGRESSION (now fails: {lt.error})", file=out)
        else:
            compared += 1
            s = speedup(b, lt)
            flag = ""
            if s < 1 - threshold:
                regressions += 1
                flag = "  REGRESSION"
            elif s > 1 + threshold:
                improvements += 1
                flag = "  improved"
            print(f"{row}  {s:>8.3f}{flag}", file=out)
    return compared, regressions, improvements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("latest", type=Path)
    parser.add_argument("--threshold", type=float, default=0.10,
                        help="relative slowdown that counts as a regression (default 0.10)")
    parser.add_argument("--warn-only", action="store_true",
                        help="report regressions but exit 0")
    args = parser.parse_args(argv)
    if args.threshold < 0:
        parser.error("--threshold must be >= 0")

    if not args.baseline.exists():
        print(f"perf: no baseline at {args.baseline}; create one with: "
              f"cp {args.latest} {args.baseline}")
        return 0
    try:
        base_ctx, base = load(args.baseline)
        latest_ctx, latest = load(args.latest)
    except (OSError, ValueError, KeyError) as e:
        print(f"perf: cannot read benchmark JSON: {e}", file=sys.stderr)
        return 2
    print_contexts(base_ctx, latest_ctx)
    compared, regressions, improvements = compare(base, latest, args.threshold)
    pct = f"{args.threshold * 100:g}%"
    print(f"perf: {compared} compared, {regressions} regressions, {improvements} improvements "
          f"(threshold {pct})")
    return 1 if regressions and not args.warn_only else 0


if __name__ == "__main__":
    sys.exit(main())
