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

import contextlib
import io
import sys
import types
from pathlib import Path

from results_io import ppbench_text
from script_cli import InputError, OneLineParser, number, read_text, run, shaped


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
    source = read_text(path, "--ref")
    try:
        exec(compile(source, str(path), "exec"), namespace)
    except Exception as e:  # noqa: BLE001 - whatever the file raises, it is not the reference
        raise InputError(f"--ref {path}: does not load as the reference's zbv_greedy.py "
                         f"({type(e).__name__}: {e})") from None
    if "PipelineGraph" not in namespace:
        raise InputError(f"--ref {path}: defines no PipelineGraph (not zbv_greedy.py)")
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


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="v_memory_reference_orders", description=__doc__.splitlines()[0])
    ap.add_argument("--ref", type=Path, required=True, help="path to zbv_greedy.py")
    ap.add_argument("--compare", metavar="PPBENCH", help="compare with this ppbench binary")
    ap.add_argument("--max-devices", type=number(int, 1, 64), default=8)
    ap.add_argument("--max-microbatches", type=number(int, 1, 256), default=16)
    ap.add_argument("mem", nargs="?", choices=["half", "min"])
    ap.add_argument("devices", nargs="?", type=number(int, 1, 1024))
    ap.add_argument("microbatches", nargs="?", type=number(int, 1, 100000))
    args = ap.parse_args(argv)
    if not args.compare and (args.mem is None or args.devices is None or
                             args.microbatches is None):
        ap.error("give MEM D N, or --compare PPBENCH")
    graph_class = load_generator(args.ref)
    if not args.compare:
        with shaped(f"--ref {args.ref}"):
            text = reference_text(graph_class, args.mem, args.devices, args.microbatches)
        sys.stdout.write(text)
        return 0
    mismatches = 0
    checked = 0
    for mem in ["half", "min"]:
        for d in range(1, args.max_devices + 1):
            for n in range(1, args.max_microbatches + 1):
                with shaped(f"--ref {args.ref}"):
                    want = reference_text(graph_class, mem, d, n)
                got = ppbench_text(args.compare, ["show", "-s", f"v-{mem}", "-d", d, "-n", n])
                # The orders are compared, not show's placement header, which the reference
                # does not write.
                got = "".join(line for line in got.splitlines(keepends=True)
                              if not line.startswith("#"))
                checked += 1
                if got != want:
                    mismatches += 1
                    print(f"v-{mem} D={d} N={n} differs", file=sys.stderr)
    print(f"{checked} orders compared, {mismatches} differ")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(run("v_memory_reference_orders", main))
