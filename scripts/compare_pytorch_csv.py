#!/usr/bin/env python3
"""Schedules travel both ways between ppbench and PyTorch's pipeline CSV (not run in CI: it needs
torch).

1. PyTorch's orders: ScheduleInterleaved1F1B and ScheduleZBVZeroBubble compute their
   `pipeline_order` per rank (`_calculate_single_rank_operations`) without a process group; the
   schedule object is made without its constructor (which wants real stages) and given the
   attributes that computation reads. `_dump_csv(..., format="compute_only")` writes them, and
   `ppbench show --schedule-file` must read back the order ppbench generates for the same
   family: interleaved-1f1b with --chunks v and --group-size N / max(1, N div D), PyTorch's
   round size (N < D and N not a multiple of D among the cases; for N < D also without
   --group-size, whose default is then N), and zb-v.
2. ppbench's CSV for every family with one chain is read the way `_load_csv` reads it
   (`_Action.from_str` per cell, then `_validate_schedule`, which infers the stage-to-rank
   mapping and checks every F, B/I and W).

Usage: /tmp/torchvenv/bin/python scripts/compare_pytorch_csv.py [build/ppbench]
Exit 0 when everything matches, 1 when a check differs or ppbench fails; prints one line per
check. 2 for a bad option or a ppbench that is not a program, 3 without torch.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from script_cli import InputError, OneLineParser, ScriptError, require_module, run

PPBENCH = "build/ppbench"
# torch.distributed.pipelining.schedules, imported by main once the arguments are read (so that
# --help and a bad option need no torch).
S: Any = None


def ppbench(*args):
    r = subprocess.run([PPBENCH, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise ScriptError(f"ppbench {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def torch_order(cls, devices, microbatches, local_stages):
    """PyTorch's compute-only pipeline_order, as its constructor computes it."""
    sched = cls.__new__(cls)
    sched.pp_group_size = devices
    sched.n_local_stages = local_stages
    sched._n_microbatches = microbatches
    sched.num_stages = sched._num_stages = devices * local_stages
    rounds = max(1, microbatches // devices)  # ScheduleInterleaved1F1B.__init__
    sched.number_of_rounds = rounds
    sched.microbatches_per_round = microbatches // rounds
    sched.pipeline_order = {r: sched._calculate_single_rank_operations(r) for r in range(devices)}
    return sched


def pytorch_group_size(devices, microbatches):
    """ScheduleInterleaved1F1B's microbatches_per_round (N must be a multiple of its rounds)."""
    rounds = max(1, microbatches // devices)
    assert microbatches % rounds == 0, (devices, microbatches)
    return microbatches // rounds


def check_torch_to_ppbench(cls, family, devices, microbatches, extra, chunks=2):
    sched = torch_order(cls, devices, microbatches, chunks)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "torch.csv")
        # PipelineScheduleMulti._dump_csv: the compute-only rows.
        S.PipelineScheduleMulti._dump_csv(sched, path)
        mine = ppbench("show", "--schedule-file", path)
    want = ppbench("show", "-s", family, "-d", str(devices), "-n", str(microbatches), *extra)
    ok = mine == want
    print(f"{'OK  ' if ok else 'DIFF'} PyTorch {cls.__name__} D={devices} N={microbatches} "
          f"v={chunks} -> ppbench reads the order of {family} {' '.join(extra)}")
    if not ok:
        print("  ppbench generates:\n" + want + "  ppbench read from PyTorch's CSV:\n" + mine)
    return ok


def check_ppbench_to_torch(family, devices, microbatches):
    text = ppbench("show", "-s", family, "-d", str(devices), "-n", str(microbatches),
                   "--format", "csv")
    if text.startswith("#"):
        print(f"SKIP {family}: two chains, which PyTorch's CSV cannot express")
        return True
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ppbench.csv")
        with open(path, "w") as f:
            f.write(text)
        # As PipelineScheduleMulti._load_csv reads it.
        with open(path, newline="") as f:
            order = {r: [S._Action.from_str(c) for c in row] for r, row in enumerate(csv.reader(f))}
    actions = [a for row in order.values() for a in row if a is not None]
    stages = 1 + max(x.stage_index for a in actions for x in (a.sub_actions or (a,)))
    try:
        mapping = S._validate_schedule(order, devices, stages, microbatches)
        ok = True
    except Exception as e:  # noqa: BLE001 - report whatever PyTorch refuses
        print(f"DIFF {family}: PyTorch refuses ppbench's CSV: {str(e).splitlines()[0]}")
        return False
    print(f"OK   ppbench {family} D={devices} N={microbatches} -> PyTorch reads it "
          f"(stage->rank {dict(sorted(mapping.items()))})")
    return ok


def main(argv=None) -> int:
    global PPBENCH, S
    parser = OneLineParser(prog="compare_pytorch_csv", description=__doc__.splitlines()[0])
    parser.add_argument("ppbench", nargs="?", default=PPBENCH,
                        help="the ppbench program (default: %(default)s)")
    PPBENCH = parser.parse_args(argv).ppbench
    if not (os.path.isfile(PPBENCH) or shutil.which(PPBENCH)):
        raise InputError(f"ppbench '{PPBENCH}' is not a program (build it first: make)")
    require_module("torch", "comparing with PyTorch's pipeline CSV")
    S = require_module("torch.distributed.pipelining.schedules",
                       "comparing with PyTorch's pipeline CSV (a torch with pipelining)")
    names = [s["name"] for s in json.loads(ppbench("list", "--format", "json"))["schedules"]]
    ok = True
    # N a multiple of D (PyTorch's round size is Megatron's g = D), N < D (one round of N) and
    # N not a multiple of D (rounds of N / max(1, N div D) > D micro-batches).
    for d, n, v in ((4, 8, 2), (2, 4, 2), (4, 12, 2), (4, 3, 2), (4, 1, 3), (3, 2, 3),
                    (4, 10, 2), (5, 12, 2), (4, 10, 3), (6, 21, 3)):
        g = pytorch_group_size(d, n)
        ok &= check_torch_to_ppbench(S.ScheduleInterleaved1F1B, "interleaved-1f1b", d, n,
                                     ["--chunks", str(v), "--group-size", str(g)], v)
    # Without --group-size: g = D where D divides N, N where N < D; both are PyTorch's.
    for d, n, v in ((4, 8, 2), (4, 3, 2), (5, 2, 3)):
        ok &= check_torch_to_ppbench(S.ScheduleInterleaved1F1B, "interleaved-1f1b", d, n,
                                     ["--chunks", str(v)], v)
    for d, n in ((4, 8), (2, 4), (4, 12)):
        ok &= check_torch_to_ppbench(S.ScheduleZBVZeroBubble, "zb-v", d, n, [])
    for name in names:
        ok &= check_ppbench_to_torch(name, 4, 8)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run("compare_pytorch_csv", main))
