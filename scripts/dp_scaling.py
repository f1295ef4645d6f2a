#!/usr/bin/env python3
"""Data x pipeline parallelism on paper: what `ppbench simulate --dp` predicts for Llama-3-8B-shaped
transformer layers (the llama3-8b preset, bf16, seq 8192, b 1) under 1F1B on D = 8 pipeline ranks,
one node (R = 1) beside two nodes holding R = 2 replicas whose gradients are all-reduced over a
400 Gb/s (50 GB/s) link between the nodes, at the end of the step and overlapped with the backward.

Every figure is a prediction of the simulator, not a measurement: per-layer times are the roofline
of the device profile (results/reference/h100_sxm_profile.json: an H100 SXM's datasheet peak BF16
FLOP/s and HBM bandwidth, so the compute is optimistic: real steps reach a fraction of peak), the
all-reduce is a ring (2 (R-1) latency + 2 (R-1)/R x bytes / bandwidth) of each stage's parameters
in bf16, and nothing else shares the link.

Writes results/reference/dp_scaling.json (atomically) and prints a markdown table. Not run in CI
(it needs a built ppbench).

  scripts/dp_scaling.py --ppbench build/ppbench
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

from results_io import PpbenchError, ppbench_json, record_value, table_script_main
from script_cli import read_json, shaped

# As the table names it (relative to the repository); read where this script lies, so that the
# script runs from any folder.
PROFILE = "results/reference/h100_sxm_profile.json"
PROFILE_PATH = Path(__file__).resolve().parent.parent / PROFILE
D, N = 8, 32  # N = 4 D micro-batches per replica: 1F1B's (D-1)/(N+D-1) bubble is 7/39
WORKLOAD = ["--workload", "transformer", "--preset", "llama3-8b", "--dtype", "bf16", "-b", "1"]
INTER_NODE_GBS, INTER_NODE_LATENCY_US = 50, 10
CASES = [  # (label, R, overlapped)
    ("D=8, R=1 (one node)", 1, False),
    ("D=8, R=2, all-reduce at the end of the step", 2, False),
    ("D=8, R=2, all-reduce overlapped with the backward", 2, True),
]


def case_args(replicas: int, overlap: bool, profile: str = PROFILE) -> list[str]:
    args = ["--schedule", "1f1b", "--devices", str(D), "--microbatches", str(N), *WORKLOAD,
            "--device-profile", profile, "--format", "json"]
    if replicas > 1:
        args += ["--dp", str(replicas), "--dp-bandwidth", str(INTER_NODE_GBS),
                 "--dp-latency", str(INTER_NODE_LATENCY_US)]
        if overlap:
            args.append("--dp-overlap")
    return args


def markdown(rows: list[dict]) -> str:
    lines = ["| case | P | step (s) | bubble | all-reduce (s) | exposed (s) | micro-batches/s "
             "| tokens/s | tokens/s per GPU |", "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r['case']} | {r['processes']} | {r['makespan']:.4f} | "
                     f"{r['bubble_fraction']:.4f} | {r['allreduce_time']:.4f} | "
                     f"{r['exposed_allreduce']:.4f} | {r['throughput']:.3f} | "
                     f"{r['tokens_per_s']:.0f} | {r['tokens_per_s_per_gpu']:.0f} |")
    return "\n".join(lines) + "\n"


def case_row(ppbench: str, label: str, replicas: int, overlap: bool) -> dict:
    """One case's row, from `ppbench simulate` (PpbenchError where its record is of another
    shape). Its command is recorded as run from the repository, the profile's path relative."""
    args = ["simulate", *case_args(replicas, overlap, str(PROFILE_PATH))]
    where = "ppbench " + " ".join(args)
    j = ppbench_json(ppbench, args)

    def value(path: str, **how):
        return record_value(j, path, where, **how)

    makespan = value("makespan")
    if makespan <= 0:  # the throughput divides by it
        raise PpbenchError(f"'{where}' printed makespan {makespan}, not a positive number", 1)
    tokens = value("workload.microbatch_size") * value("workload.config.seq")
    processes = D * replicas
    throughput = replicas * N / makespan  # micro-batches per second, all replicas
    return {
        "case": label, "replicas": replicas, "overlap": overlap, "processes": processes,
        "command": "ppbench simulate " + " ".join(case_args(replicas, overlap)),
        "makespan": makespan, "bubble_fraction": value("bubble_fraction"),
        "allreduce_time": value("allreduce_time", default=0.0),
        "exposed_allreduce": value("exposed_allreduce", default=0.0),
        "gradient_bytes_per_stage": stage_volumes(j, where),
        "partition": value("partition.layer_counts", kind=list),
        "throughput": throughput, "tokens_per_s": throughput * tokens,
        "tokens_per_s_per_gpu": throughput * tokens / processes}


def stage_volumes(record: dict, where: str) -> list[float] | None:
    """data_parallel.stage_volume: each stage's gradient bytes that its replicas all-reduce,
    one finite number per stage; None where the record has no data_parallel (R = 1)."""
    path = "data_parallel.stage_volume"
    volumes = record_value(record, path, where, kind=list, default=None)
    for i, v in enumerate(volumes or []):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise PpbenchError(f"'{where}' printed a record whose {path}[{i}] is {v!r}, not a "
                               "finite number", 1)
    return volumes


def build(ppbench: str) -> dict:
    rows = [case_row(ppbench, *case) for case in CASES]
    one, two, over = rows
    efficiency = two["throughput"] / (2 * one["throughput"])
    summary = (f"Two replicas reach {efficiency:.3f} of twice the one-node throughput: the step "
               f"grows from {one['makespan']:.4f} s to {two['makespan']:.4f} s (the largest "
               f"all-reduce, {two['exposed_allreduce']:.4f} s, is on a rank that ends its backward "
               "before rank 0 does; per-rank times are in the JSON). Under 1F1B a rank holds "
               "one stage whose last "
               "backward is the rank's last action, so overlapping the all-reduce with the "
               "backward hides nothing"
               + (" (the two R = 2 rows are equal)." if over["makespan"] == two["makespan"]
                  else f" (overlapped: {over['makespan']:.4f} s)."))
    profile = read_json(PROFILE_PATH, "device profile")
    with shaped(f"device profile {PROFILE_PATH}"):
        rates = {k: profile[k] for k in ("peak_flops", "memory_bandwidth", "link_bandwidth",
                                         "link_latency")}
        notes = profile["assumptions"]
    return {
        "label": "predicted by ppbench simulate (not measured)",
        "assumptions": {
            "device_profile": PROFILE, "device_rates": rates,
            "device_notes": notes,
            "inter_node_link": f"{INTER_NODE_GBS} GB/s (400 Gb/s) per GPU, "
                               f"{INTER_NODE_LATENCY_US} us per ring step",
            "allreduce": "ring: 2 (R-1) latency + 2 (R-1)/R x bytes / bandwidth, bytes = the "
                         "stage's parameters x 2 (bf16 gradients); replicas identical",
            "workload": "llama3-8b preset (32 decoder layers, hidden 4096, seq 8192), bf16, "
                        "micro-batch 1 sequence, balanced partition",
            "schedule": f"1f1b, D = {D}, N = {N} micro-batches per replica",
        },
        "rows": rows,
        "markdown": markdown(rows),
        "summary": summary,
    }


def main(argv: list[str] | None = None) -> int:
    return table_script_main(__doc__, "dp_scaling", "results/reference/dp_scaling.json", build,
                             (OSError, PpbenchError), argv)


if __name__ == "__main__":
    sys.exit(main())
