#!/usr/bin/env python3
"""Data-parallel all-reduces across emulated nodes joined by a link of known rate, measured
beside what the simulator's ring formula predicts for that link.

    benchmarks/allreduce_link.py [--ppbench build/ppbench] [--rate 1gbit] [--burst BYTES]
                                 [--replicas 2,4] [--widths 256,1024] [--protocols put,send]
                                 [--steps 4] [--repeats 3] [--out FILE]

R emulated nodes (scripts/emulated-nodes.sh: a network namespace each, its egress shaped to
--rate by a token bucket, all joined by one bridge) each run one process of `mpirun -np R
ppbench run --pp 1 --dp R` (scripts/mpi-local-agent.sh with PPBENCH_AGENT_NETNS=1): an MLP of
8 layers of the given width, f32, whose gradients are all-reduced across the nodes once a step.

First the link is measured: bulk TCP both ways at once between two nodes (its goodput: the
lower of the two rates received, what it really carries, as an all-reduce sends and receives at
once), a one-byte TCP ping-pong (half the shortest round trip: its latency), and what OpenMPI
itself carries over it one way and both ways at once, by each protocol (benchmarks/mpi_duplex.cpp,
where it is built beside ppbench). Then, for each R, width, all-reduce algorithm (OpenMPI's own
choice, and its ring, coll_tuned algorithm 4) and protocol, `repeats` runs: the all-reduce of the
last step, taken as
the shortest of the R processes' (the one that arrived last waited least for the others, so its
time is nearest the collective's own), median over the runs; beside it `ppbench simulate --dp R
--dp-bandwidth <goodput> --dp-latency <latency>` on the same workload, whose all-reduce is the
ring formula
    2 (R - 1) / R x bytes / bandwidth + 2 (R - 1) x latency;
and the bus bandwidth the measurement implies, 2 (R - 1) / R x bytes / time, as a share of the
goodput.

The protocols are the two ways OpenMPI's TCP transport (btl tcp) carries a message of 192 KiB or
more: `put`, its default, emulating a remote write of the rest once the receiver has
answered; and `send`, the rest in send/receive fragments (`--mca btl_tcp_flags send,inplace`).
By `put` the two directions of an exchange with one peer take turns, by `send` they move at once
(results/perf/README.md, "All-reduces across a link").

Writes one JSON record (atomically), default results/perf/allreduce-link/<commit>.json, with
provenance (commit, host, CPU, cores, kernel, OpenMPI, load average, date, the rate and what the
link measured), and prints a table. Needs root (network namespaces) and iproute2; the nodes are
removed at the end, also after a failure.

Exit codes: 0 done; 2 a bad option or no ppbench at --ppbench; 3 the machine cannot (no mpirun,
no MPI in ppbench, not root, no namespaces or tbf); 1 a run failed (its command and last line).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from link_nodes import (emulated, link_parser, measure_link, node_names, on_nodes,
                        require_settings, simulate)
from mpi_bench import Failure, name_list, positive, record_benchmark
from script_cli import run

WORKLOAD = ["--workload", "mlp", "--layers", "8", "-b", "8", "--dtype", "f32",
            "--schedule", "gpipe", "-n", "2"]
# OpenMPI's choice, and its ring (coll_tuned's allreduce algorithm 4), the simulator's model.
ALGORITHMS = {"default": [],
              "ring": ["--mca", "coll_tuned_use_dynamic_rules", "1",
                       "--mca", "coll_tuned_allreduce_algorithm", "4"]}
# How OpenMPI's TCP transport carries a message of 192 KiB or more: its default (an emulated
# remote write, the put flag on), or send/receive fragments only.
PROTOCOLS = {"put": [], "send": ["--mca", "btl_tcp_flags", "send,inplace"]}
MPI_PROBE_BYTES = 16 << 20


def measure_mpi_link(ppbench: str, mpirun: str, names: list[str], network: str,
                     protocols: list[str], tmp: Path) -> dict | None:
    """What OpenMPI itself carries between the first two nodes, one way and both ways at once,
    by each protocol (benchmarks/mpi_duplex.cpp, built beside ppbench); None where it is not
    built."""
    program = Path(ppbench).resolve().parent / "benchmarks" / "mpi_duplex"
    if not program.is_file():
        print(f"  ({program} is not built: the MPI transport's own rates are left out)",
              flush=True)
        return None
    return {protocol: json.loads(on_nodes(mpirun, names[:2], network, tmp, str(program),
                                          str(MPI_PROBE_BYTES), "4",
                                          mca=tuple(PROTOCOLS[protocol])).stdout)
            for protocol in protocols}


def run_allreduce(ppbench: str, mpirun: str, names: list[str], network: str, width: int,
                  algorithm: str, protocol: str, steps: int, tmp: Path) -> dict:
    """One `mpirun -np R ppbench run --pp 1 --dp R`, a process per node: the last step's
    all-reduce bytes and the shortest of the processes' all-reduce times."""
    mca = (*ALGORITHMS[algorithm], *PROTOCOLS[protocol])
    r = on_nodes(mpirun, names, network, tmp, ppbench, "run", *WORKLOAD, "--width", str(width),
                 "--pp", "1", "--dp", str(len(names)), "--optimizer", "none", "--steps",
                 str(steps), "--warmup", "1", "--format", "json", mca=mca)
    rec = json.loads(r.stdout)
    require_settings(rec, mca, f"{algorithm} by {protocol}")
    procs = rec["data_parallel"]["per_process"]
    return {"bytes": procs[0]["allreduce_bytes"],
            "allreduce_s": min(p["allreduce_s"] for p in procs),
            "per_process_s": [p["allreduce_s"] for p in procs],
            "hosts": sorted({p["host"] for p in procs})}


def simulate_allreduce(ppbench: str, replicas: int, width: int, link: dict) -> dict:
    rec = simulate(ppbench, *WORKLOAD, "--width", str(width), "-d", "1", "--dp", str(replicas),
                   "--dp-bandwidth", f"{link['goodput_bytes_per_s'] / 1e9:.9g}",
                   "--dp-latency", f"{link['latency_s'] * 1e6:.6g}")
    return {"bytes": rec["allreduce_bytes"], "allreduce_s": rec["allreduce_time"]}


def measure(ppbench: str, mpirun: str, network: str, replicas: list[int], widths: list[int],
            protocols: list[str], steps: int, repeats: int, link: dict,
            tmp: Path) -> list[dict]:
    rows = []
    points = [(r, width, algorithm, protocol) for r in replicas for width in widths
              for algorithm in ALGORITHMS for protocol in protocols]
    predictions = {(r, width): simulate_allreduce(ppbench, r, width, link)
                   for r in replicas for width in widths}
    for r, width, algorithm, protocol in points:
        predicted = predictions[r, width]
        runs = [run_allreduce(ppbench, mpirun, node_names(r), network, width, algorithm,
                              protocol, steps, tmp)
                for _ in range(repeats)]
        if len(runs[0]["hosts"]) != r:
            raise Failure(f"R = {r}: the processes ran on {runs[0]['hosts']}, not on "
                          f"{r} nodes of their own")
        if any(run["bytes"] != predicted["bytes"] for run in runs):
            raise Failure(f"R = {r}, width {width}: the run all-reduced "
                          f"{runs[0]['bytes']:.0f} bytes, the simulator "
                          f"{predicted['bytes']:.0f}")
        measured = statistics.median(run["allreduce_s"] for run in runs)
        bus = 2 * (r - 1) / r * predicted["bytes"] / measured
        row = {"replicas": r, "width": width, "algorithm": algorithm,
               "protocol": protocol, "bytes": predicted["bytes"], "measured_s": measured,
               "runs": runs, "predicted_s": predicted["allreduce_s"],
               "measured_over_predicted": measured / predicted["allreduce_s"],
               "bus_bandwidth_bytes_per_s": bus,
               "share_of_goodput": bus / link["goodput_bytes_per_s"]}
        rows.append(row)
        print(f"  R = {r}  width {width:5}  {algorithm:7}  {protocol:4}  "
              f"{row['bytes'] / 1e6:7.2f} MB  measured {measured * 1e3:8.2f} ms  predicted "
              f"{predicted['allreduce_s'] * 1e3:8.2f} ms  "
              f"x{row['measured_over_predicted']:.2f}", flush=True)
    return rows


def print_table(result: dict) -> None:
    link = result["link"]
    print(f"\nlink {result['rate']} (bucket {link['burst_bytes']} bytes): goodput "
          f"{link['goodput_bytes_per_s'] / 1e6:.1f} MB/s both ways at once, latency "
          f"{link['latency_s'] * 1e6:.1f} us")
    for protocol, mpi in (link.get("mpi") or {}).items():
        print(f"OpenMPI over it by {protocol}: {mpi['one_way_bytes_per_s'] / 1e6:.1f} MB/s one "
              f"way, {mpi['both_ways_bytes_per_s'] / 1e6:.1f} MB/s each way both at once (the "
              f"first direction done at {mpi['both_ways_first_share']:.0%} of the exchange)")
    print(f"{'R':>2} {'width':>6} {'algorithm':<9} {'protocol':<8} {'MB':>7} {'measured ms':>11} "
          f"{'ring ms':>9} {'meas/ring':>9} {'bus MB/s':>9} {'of link':>7}")
    for r in result["rows"]:
        print(f"{r['replicas']:>2} {r['width']:>6} {r['algorithm']:<9} {r['protocol']:<8} "
              f"{r['bytes'] / 1e6:7.2f} "
              f"{r['measured_s'] * 1e3:11.2f} {r['predicted_s'] * 1e3:9.2f} "
              f"{r['measured_over_predicted']:9.2f} "
              f"{r['bus_bandwidth_bytes_per_s'] / 1e6:9.1f} {r['share_of_goodput']:7.0%}")


def run_on_nodes(a: argparse.Namespace, names: list[str], mpirun: str, result: dict) -> None:
    """Makes the nodes, measures the link and the all-reduces into `result`, removes the nodes."""
    with emulated(names, a.rate, a.burst) as made, \
            tempfile.TemporaryDirectory(prefix="allreduce_link-") as tmp:
        print(f"{len(names)} emulated nodes, each link {a.rate}; measuring the link", flush=True)
        result["link"] = measure_link(made, names)
        result["link"]["mpi"] = measure_mpi_link(a.ppbench, mpirun, names, made.network,
                                                 a.protocols, Path(tmp))
        result["rows"] = measure(a.ppbench, mpirun, made.network, a.replicas, a.widths,
                                 a.protocols, a.steps, a.repeats, result["link"], Path(tmp))


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"'{text}': every value must be a positive integer")
    return values


def main(argv: list[str] | None = None) -> int:
    ap = link_parser("allreduce_link", __doc__.splitlines()[0], "allreduce-link")
    ap.add_argument("--replicas", type=int_list, default=[2, 4],
                    help="R, one process per node (2 to 16, comma-separated; default 2,4)")
    ap.add_argument("--widths", type=int_list, default=[256, 1024],
                    help="MLP widths (8 layers; 16 to 4096; default 256,1024)")
    ap.add_argument("--protocols", type=name_list(PROTOCOLS, "protocol"), default=list(PROTOCOLS),
                    help="how OpenMPI's TCP transport carries large messages: put (its "
                         "default), send (btl_tcp_flags send,inplace); comma-separated; default "
                         "put,send")
    ap.add_argument("--steps", type=positive, default=4, help="measured steps per run")
    ap.add_argument("--repeats", type=positive, default=3, help="runs of each point")
    a = ap.parse_args(argv)
    if any(not 2 <= r <= 16 for r in a.replicas):
        ap.error(f"--replicas {a.replicas}: each R must be 2 to 16")
    if any(not 16 <= w <= 4096 for w in a.widths):
        ap.error(f"--widths {a.widths}: each width must be 16 to 4096")
    names = node_names(max(a.replicas))
    result: dict = {"benchmark": "allreduce_link", "rate": a.rate, "steps": a.steps,
                    "repeats": a.repeats, "workload": WORKLOAD,
                    "protocols": {p: PROTOCOLS[p] for p in a.protocols}}
    return record_benchmark("allreduce_link", "allreduce-link", a.ppbench, result,
                            lambda mpirun, result: run_on_nodes(a, names, mpirun, result),
                            print_table, a.out)


if __name__ == "__main__":
    sys.exit(run("allreduce_link", main))
