#!/usr/bin/env python3
"""Print PyTorch's per-rank compute order for a schedule family in ppbench's text form.

    scripts/torch_orders.py FAMILY D N [V]
    scripts/torch_orders.py --compare PPBENCH [--devices 2-8] [--chunks 1-3]

FAMILY is a ppbench name whose order follows one of PyTorch's schedule classes
(torch.distributed.pipelining.schedules): looped-bfs (ScheduleLoopedBFS) or interleaved-zb
(ScheduleInterleavedZeroBubble). The class is built with stand-in stages (rank 0's V stages:
the class computes every rank's order from their count alone), so no process group is needed.
PyTorch pads its per-rank lists with idle slots (None); ppbench's IR has none (a rank waits),
so they are dropped. Output: "rank r: F0.0 F0.1 ..." one line per rank, as `ppbench show`.
When PyTorch's constructor rejects the parameters, its message is printed on stderr, exit 1.

--compare runs PPBENCH show for every family, D in --devices, N in 1..4D and V in --chunks,
and prints one line per case where the two differ or only one side accepts the parameters, then
the counts; exit 0 when every case matched.

Needs torch (not installed in CI): this is a tool for checking the generators by hand. Exit 2
for a bad argument or a PPBENCH that is not a program, 3 without torch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from script_cli import InputError, OneLineParser, ScriptError, number, require_module, run

CLASSES = {"looped-bfs": "ScheduleLoopedBFS", "interleaved-zb": "ScheduleInterleavedZeroBubble"}
LETTERS = {"FORWARD": "F", "FULL_BACKWARD": "B", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W"}


class _Stage:
    """What the schedule constructors read of a pipeline stage."""

    def __init__(self, index: int, devices: int, stages: int):
        import torch

        self.stage_index = index
        self.group_size = devices
        self.group_rank = 0
        self.num_stages = stages
        self.is_first = index == 0
        self.is_last = index == stages - 1
        self.submod = torch.nn.Identity()


def torch_order(family: str, d: int, n: int, v: int) -> str:
    """PyTorch's order as ppbench text; raises what PyTorch's constructor raises."""
    from torch.distributed.pipelining import schedules

    cls = getattr(schedules, CLASSES[family])
    stages = [_Stage(c * d, d, v * d) for c in range(v)]
    order = cls(stages, n).pipeline_order
    lines = []
    for rank in range(d):
        words = [f"{LETTERS[a.computation_type.name]}{a.stage_index}.{a.microbatch_index}"
                 for a in order[rank] if a is not None]
        lines.append(f"rank {rank}: " + " ".join(words) + "\n")
    return "".join(lines)


def ppbench_order(exe: str, family: str, d: int, n: int, v: int) -> tuple[int, str]:
    r = subprocess.run([exe, "show", "-s", family, "-d", str(d), "-n", str(n), "--chunks",
                        str(v)], capture_output=True, text=True)
    return r.returncode, r.stdout if r.returncode == 0 else r.stderr.strip()


def span(text: str) -> range:
    """An argparse type: "A" or "A-B", whole numbers 1 <= A <= B."""
    lo, _, hi = text.partition("-")
    one = number(int, 1)
    first, last = one(lo), one(hi or lo)
    if last < first:
        raise argparse.ArgumentTypeError(f"'{text}' is an empty range (give A-B with A <= B)")
    return range(first, last + 1)


def compare(exe: str, devices: range, chunks: range) -> int:
    cases = mismatches = rejected = 0
    for family in CLASSES:
        for d in devices:
            for n in range(1, 4 * d + 1):
                for v in chunks:
                    cases += 1
                    try:
                        want, why = torch_order(family, d, n, v), ""
                    except Exception as e:  # PyTorch's rejection, compared with ppbench's
                        want, why = None, str(e)
                    rc, got = ppbench_order(exe, family, d, n, v)
                    if want is None and rc != 0:
                        rejected += 1
                        continue
                    if want is not None and rc == 0 and got == want:
                        continue
                    mismatches += 1
                    print(f"{family} D={d} N={n} v={v}: ppbench rc={rc} "
                          f"{got.splitlines()[0] if got else ''!r}; torch "
                          f"{'rejects: ' + why if want is None else 'accepts'}")
    print(f"{cases} cases, {mismatches} differ, {rejected} rejected by both")
    return 1 if mismatches else 0


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="torch_orders", description=__doc__.split("\n")[0])
    ap.add_argument("args", nargs="*", help="FAMILY D N [V]")
    ap.add_argument("--compare", metavar="PPBENCH", help="compare with this ppbench binary")
    ap.add_argument("--devices", type=span, default="2-8",
                    help="D range for --compare (default 2-8)")
    ap.add_argument("--chunks", type=span, default="1-3",
                    help="V range for --compare (default 1-3)")
    a = ap.parse_args(argv)
    if a.compare:
        if not (os.path.isfile(a.compare) or shutil.which(a.compare)):
            raise InputError(f"--compare '{a.compare}' is not a program (build it first: make)")
        require_module("torch", "torch_orders.py (PyTorch's schedule classes)")
        return compare(a.compare, a.devices, a.chunks)
    if len(a.args) not in (3, 4) or a.args[0] not in CLASSES:
        ap.error(f"give FAMILY D N [V], FAMILY one of {', '.join(CLASSES)}")
    values = []
    for name, text in zip("DNV", (a.args[1:] + ["2"])[:3]):  # V is 2 unless given
        try:
            values.append(number(int, 1)(text))
        except argparse.ArgumentTypeError as e:
            ap.error(f"{name}: {e}")
    family, (d, n, v) = a.args[0], values
    require_module("torch", "torch_orders.py (PyTorch's schedule classes)")
    try:
        order = torch_order(family, d, n, v)
    except Exception as e:  # noqa: BLE001 - PyTorch's rejection, whatever its type
        raise ScriptError(f"PyTorch rejects {family} D={d} N={n} v={v}: {e}") from None
    sys.stdout.write(order)
    return 0


if __name__ == "__main__":
    sys.exit(run("torch_orders", main))
