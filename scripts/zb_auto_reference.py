#!/usr/bin/env python3
"""Print the Zero Bubble reference's ZB-1p/ZB-2p order in ppbench's text form.

Runs the authors' heuristic search (sail-sg/zero-bubble-pipeline-parallelism,
megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py, Graph.manual_order and
initial_solution) on one configuration, so that `ppbench show --schedule zb-1p ...` can be
compared with it line by line. Not run in CI: it needs that file from a checkout of the
reference, e.g.

  git -C zero-bubble-pipeline-parallelism show \
      HEAD:megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py > /tmp/zb.py
  scripts/zb_auto_reference.py /tmp/zb.py --devices 4 --microbatches 8 --memory-limit 4 \
      --cost F=1,I=1,W=1 --comm 0

zb.py imports torch (a type annotation only), pulp (for the ILP's values, unused by the
heuristic) and its sibling graph.py (GraphConfig); small stand-ins replace them so that plain
python3 runs it. Memory in units of M_B: F +1, B -(1 - w), W -w with w = --w-memory (M_W / M_B;
the default 1 is how the reference's runtime plans its first schedule), limit in M_B.
"""
import argparse
import dataclasses
import sys
import types
from typing import List, Optional

from script_cli import InputError, OneLineParser, number, read_text, run, shaped


@dataclasses.dataclass
class GraphConfig:
    """The fields of graph.py's GraphConfig that zb.py's heuristic reads."""

    mem_f: List[float] = None
    mem_b: List[float] = None
    mem_w: List[float] = None
    max_mem: Optional[List[float]] = None
    cost_f: List[float] = None
    cost_b: List[float] = None
    cost_w: List[float] = None
    cost_comm: float = 0.0
    print_scaling: int = 1
    max_chunks: int = 1
    n_stages: int = None
    n_micro: int = None


def install_stubs():
    if "torch" not in sys.modules:
        try:
            import torch  # noqa: F401
        except ImportError:
            torch = types.ModuleType("torch")
            torch.Tensor = object
            sys.modules["torch"] = torch
    pulp = types.ModuleType("pulp")
    pulp.value = lambda x: x
    sys.modules["pulp"] = pulp
    name = "megatron.core.pipeline_parallel.zerobubble.scheduler.graph"
    parts = name.split(".")
    for i in range(1, len(parts)):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    graph = types.ModuleType(name)
    graph.GraphConfig = GraphConfig
    graph.ScheduledNode = object
    graph.FuncType = types.SimpleNamespace(F="F", B="B", W="W")
    sys.modules[name] = graph


def load_zb(path):
    """The reference's zb.py, run as a module; a file that is not Python, or that fails as it
    loads, is an InputError naming it."""
    install_stubs()
    module = types.ModuleType("zb_reference")
    source = read_text(path, "zb.py")
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except Exception as e:  # noqa: BLE001 - whatever the file raises, it is not the reference
        raise InputError(f"zb.py {path}: does not load as the reference's zb.py "
                         f"({type(e).__name__}: {e})") from None
    return module


def parse_cost(text):
    """An argparse type: F=..,I=..,W=.. (finite, >= 0), the others 1."""
    costs = {"F": 1.0, "I": 1.0, "W": 1.0}
    cost = number(float, 0)
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key not in costs:
            raise argparse.ArgumentTypeError(f"unknown key {key!r} in '{text}' "
                                             "(allowed: F, I, W)")
        costs[key] = cost(value)
    return costs


def reference_order(zb, devices, microbatches, costs, comm, limit, w_memory=1.0):
    config = GraphConfig(
        mem_f=[1.0] * devices,
        mem_b=[w_memory - 1.0] * devices,
        mem_w=[-w_memory] * devices,
        max_mem=[float(limit)] * devices,
        cost_f=[costs["F"]] * devices,
        cost_b=[costs["I"]] * devices,
        cost_w=[costs["W"]] * devices,
        cost_comm=float(comm),
        n_stages=devices,
        n_micro=microbatches,
    )
    graph = zb.Graph.build_graph(devices, microbatches, config)
    _, _, end = zb.initial_solution(graph, print_result=False)
    lines = []
    for stage in range(devices):
        # As create_scheduled_nodes: F, then B, then W, each by micro-batch, stably sorted by end.
        nodes = [(kind, mb) for kind in range(3) for mb in range(microbatches)]
        nodes.sort(key=lambda n: end[graph.get_id(n[0], stage, n[1])])
        names = " ".join(f"{'FIW'[k]}{stage}.{mb}" for k, mb in nodes)
        lines.append(f"rank {stage}: {names}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = OneLineParser(prog="zb_auto_reference", description=__doc__.splitlines()[0])
    ap.add_argument("zb_py", help="the reference's zerobubble/scheduler/zb.py")
    ap.add_argument("--devices", type=number(int, 1, 1024), required=True)
    ap.add_argument("--microbatches", type=number(int, 1, 100000), required=True)
    ap.add_argument("--memory-limit", type=number(float, 0), required=True,
                    help="in M_B per rank")
    ap.add_argument("--cost", type=parse_cost, default=parse_cost("F=1,I=1,W=1"))
    ap.add_argument("--comm", type=number(float, 0), default=0.0)
    ap.add_argument("--w-memory", type=number(float, 0), default=1.0,
                    help="M_W / M_B (default 1)")
    args = ap.parse_args(argv)
    zb = load_zb(args.zb_py)
    with shaped(f"zb.py {args.zb_py}"):
        order = reference_order(zb, args.devices, args.microbatches, args.cost, args.comm,
                                args.memory_limit, args.w_memory)
    sys.stdout.write(order)
    return 0


if __name__ == "__main__":
    sys.exit(run("zb_auto_reference", main))
