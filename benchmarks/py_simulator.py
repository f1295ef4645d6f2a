#!/usr/bin/env python3
"""A straightforward Python simulator of one 1F1B step, the yardstick for `ppbench simulate`.

    benchmarks/py_simulator.py D N [--f 1 --b 2]

Generates 1F1B's per-rank order (Megatron's warm-up of D-r-1 forwards), walks the ranks in
dependency order with uniform costs and prints the makespan and the bubble fraction as JSON.
It is what a researcher would write in an afternoon: plain lists and dicts, no numpy. Its
makespan must equal ppbench's for the same D and N (benchmarks/cli_speed.py checks it).
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from script_cli import OneLineParser, number, run  # noqa: E402


def one_f_one_b(d, n):
    ranks = []
    for r in range(d):
        warm = min(d - r - 1, n)
        order = [("F", r, m) for m in range(warm)]
        for k in range(n - warm):
            order += [("F", r, warm + k), ("B", r, k)]
        order += [("B", r, m) for m in range(n - warm, n)]
        ranks.append(order)
    return ranks


def simulate(ranks, d, f, b):
    end = {}  # (op, stage, mb) -> end time
    free = [0.0] * d
    nxt = [0] * d
    left = sum(len(o) for o in ranks)
    while left:
        progressed = False
        for r in range(d):
            while nxt[r] < len(ranks[r]):
                op, s, m = ranks[r][nxt[r]]
                deps = [("F", s - 1, m)] if op == "F" and s > 0 else []
                if op == "B":
                    deps = [("F", s, m)] + ([("B", s + 1, m)] if s + 1 < d else [])
                if any(dep not in end for dep in deps):
                    break
                start = max([free[r]] + [end[dep] for dep in deps])
                end[(op, s, m)] = free[r] = start + (f if op == "F" else b)
                nxt[r] += 1
                left -= 1
                progressed = True
        if not progressed:
            raise SystemExit("deadlock")
    makespan = max(free)
    busy = sum(len(o) for o in ranks) / 2 * (f + b)
    return makespan, 1 - busy / (d * makespan)


def main(argv=None):
    ap = OneLineParser(prog="py_simulator", description=__doc__.splitlines()[0])
    ap.add_argument("devices", type=number(int, 1, 4096))
    ap.add_argument("microbatches", type=number(int, 1, 1_000_000))
    ap.add_argument("--f", type=number(float, 0, low_open=True), default=1.0)
    ap.add_argument("--b", type=number(float, 0, low_open=True), default=2.0)
    a = ap.parse_args(argv)
    makespan, bubble = simulate(one_f_one_b(a.devices, a.microbatches), a.devices, a.f, a.b)
    print(json.dumps({"makespan": makespan, "bubble_fraction": bubble}))
    return 0


if __name__ == "__main__":
    sys.exit(run("py_simulator", main))
