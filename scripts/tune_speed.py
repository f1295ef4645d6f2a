#!/usr/bin/env python3
"""How many candidate schedules `ppbench tune` simulates per second, as whole processes (start,
search, JSON out), at D = 8 with a global batch of 32 (N in {8, 16, 32}; docs/schedules.md,
"Choosing a schedule: tune"). Not run in CI: a figure to quote, not a threshold.

    scripts/tune_speed.py [PPBENCH] [--runs 50]
"""
import sys
import time

from results_io import ppbench_json
from script_cli import OneLineParser, ScriptError, number, run

WORKLOADS = {
    "mlp": ["--workload", "mlp", "--layers", "32", "--width", "1024"],
    "llama3-8b": ["--workload", "transformer", "--preset", "llama3-8b"],
}


def candidates_of(record: object, ppbench: str) -> list[dict]:
    """The candidates of `ppbench tune`'s record; ScriptError (exit 1, as for a ppbench that
    prints no JSON) where the program printed a record of another shape."""
    cands = record.get("candidates") if isinstance(record, dict) else None
    if not isinstance(cands, list) or not all(isinstance(c, dict) for c in cands):
        raise ScriptError(f"'{ppbench} tune' printed no record with a list of candidates")
    return cands


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="tune_speed", description=__doc__.splitlines()[0])
    ap.add_argument("ppbench", nargs="?", default="build/ppbench")
    ap.add_argument("--runs", type=number(int, 1), default=50)
    a = ap.parse_args(argv)
    for name, wl in WORKLOADS.items():
        args = ["tune", *wl, "-d", "8", "--global-batch", "32", "--memory-limit-bytes", "1T",
                "--format", "json"]
        start = time.perf_counter()
        for _ in range(a.runs):
            record = ppbench_json(a.ppbench, args)  # PpbenchError (its exit status) on failure
        per_run = (time.perf_counter() - start) / a.runs
        cands = candidates_of(record, a.ppbench)
        simulated = sum(c.get("status") != "invalid" for c in cands)
        at32 = sum(c.get("status") != "invalid" and c.get("microbatches") == 32 for c in cands)
        print(f"{name}: {simulated} candidates simulated ({at32} at N=32) in "
              f"{per_run * 1e3:.1f} ms per process: {simulated / per_run:.0f} per second "
              f"(counting the N=32 ones alone: {at32 / per_run:.0f} per second)")
        # A figure to quote says where it was measured: the last run's own provenance.
        print(f"  {provenance_line(record)}; a process's start-up included")
    return 0


def provenance_line(record: dict) -> str:
    """Where and with what the figure was measured, from ppbench's record."""
    p = record.get("provenance") if isinstance(record.get("provenance"), dict) else {}
    load = (p.get("load_average") or [None])[0]
    load_text = f"{load:.1f}" if isinstance(load, (int, float)) else "?"
    return (f"ppbench {p.get('ppbench_version', '?')} at commit {p.get('git_commit', '?')}, "
            f"{p.get('host', '?')} ({p.get('cpu', '?')}, {p.get('cpu_cores', '?')} cores), "
            f"{p.get('date', '?')}, 1-minute load {load_text}")


if __name__ == "__main__":
    sys.exit(run("tune_speed", main))
