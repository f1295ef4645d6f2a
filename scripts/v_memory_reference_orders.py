#!/usr/bin/env python3
"""Print the per-rank orders of the authors' V-Half / V-Min generator in ppbench's text form, and
optionally compare them with `ppbench show` for a range of (D, N).

The generator is zbv_greedy.py of sail-sg/zero-bubble-pipeline-parallelism
(megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py); pass the file with --ref.
It is pure Python; its one import from Megatron (node types) is replaced by a stand-in here, so
neither Megatron nor torch is needed. Not run in CI.

  scripts/v_memory_reference_orders.py --ref zbv_greedy.py half 4 8
  scripts/v_memory_reference_orders.py --ref zbv_greedy.py --compare build/ppbench \
      --max-devices 10 --max-microbatches 24
"""
from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import types
from pathlib import Path


def load_generator(path: Path):
    # The reference imports ScheduledNode and the F/B/W kinds from Megatron's scheduler package;
    # a stand-in module with the same names lets the file load on its own.
    stand_in = types.ModuleType("megatron.core.pipeline_parallel.zerobubble.scheduler.graph")

    class ScheduledNode:  # only the fields create_schedule sets are read back
        def __init__(self, **fields):
            self.__dict__.update(fields)

    stand_in.ScheduledNode = ScheduledNode
    stand_in.F, stand_in.B, stand_in.W, stand_in.FuncType = "F", "B", "W", None
    parts = stand_in.__name__.split(".")
    for k in range(1, len(parts)):
        sys.modules.setdefault(".".join(parts[:k]), types.ModuleType(".".join(parts[:k])))
    sys.modules[stand_in.__name__] = stand_in
    namespace: dict = {"__name__": "zbv_greedy"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["PipelineGraph"]


def reference_text(graph_class, mem: str, devices: int, microbatches: int) -> str:
    config = types.SimpleNamespace(n_stages=devices, max_chunks=2)
    # The costs only feed the reference's log line (its order compares slots), as in its runtime.
    graph = graph_class(devices, microbatches, mem, 1000, 1000, 1000, 1)
    with contextlib.redirect_stdout(io.StringIO()):
        local_order = graph.create_schedule(config)
    ops = {"F": "F", "B": "I", "W": "W"}  # the reference's B is the input-gradient half
    lines = []
    for rank, nodes in enumerate(local_order):
        tokens = [f"{ops[n.type]}{n.layer_group_idx}.{n.microbatch}" for n in nodes]
        lines.append(f"rank {rank}: " + " ".join(tokens))
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", type=Path, required=True, help="path to zbv_greedy.py")
    ap.add_argument("--compare", metavar="PPBENCH", help="compare with this ppbench binary")
    ap.add_argument("--max-devices", type=int, default=8)
    ap.add_argument("--max-microbatches", type=int, default=16)
    ap.add_argument("mem", nargs="?", choices=["half", "min"])
    ap.add_argument("devices", nargs="?", type=int)
    ap.add_argument("microbatches", nargs="?", type=int)
    args = ap.parse_args()
    graph_class = load_generator(args.ref)
    if not args.compare:
        if args.mem is None or args.devices is None or args.microbatches is None:
            ap.error("give MEM D N, or --compare PPBENCH")
        sys.stdout.write(reference_text(graph_class, args.mem, args.devices, args.microbatches))
        return 0
    mismatches = 0
    checked = 0
    for mem in ["half", "min"]:
        for d in range(1, args.max_devices + 1):
            for n in range(1, args.max_microbatches + 1):
                want = reference_text(graph_class, mem, d, n)
                got = subprocess.run(
                    [args.compare, "show", "-s", f"v-{mem}", "-d", str(d), "-n", str(n)],
                    capture_output=True, text=True, check=True).stdout
                checked += 1
                if got != want:
                    mismatches += 1
                    print(f"v-{mem} D={d} N={n} differs", file=sys.stderr)
    print(f"{checked} orders compared, {mismatches} differ")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
