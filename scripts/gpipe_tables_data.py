"""The pure parts of scripts/gpipe_tables.py: GPipe's published figures, the balanced partition of
measured per-layer times, the normalisation the paper uses and the table rows built from them.

Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism",
NeurIPS 2019 (arXiv 1811.06965), Table 2 (TPU v3, K partitions x M micro-batches, normalised to
K = 2, M = 1 per model) and Table 3 (P100 GPUs without NVLink, M = 32, normalised to K = 2).
Nothing here runs ppbench or reads the clock, so tests/scripts can check it with fake data.
"""
from __future__ import annotations

from statistics import median
from typing import Iterable

PAPER = ("Huang et al., GPipe: Efficient Training of Giant Neural Networks using Pipeline "
         "Parallelism, NeurIPS 2019 (arXiv 1811.06965)")

KS = (2, 4, 8)
MS = (1, 4, 32)

# Table 2: {model: {(K, M): normalised throughput}}.
TABLE2 = {
    "AmoebaNet-D (18, 256)": {(2, 1): 1.0, (4, 1): 1.13, (8, 1): 1.38,
                              (2, 4): 1.07, (4, 4): 1.26, (8, 4): 1.72,
                              (2, 32): 1.21, (4, 32): 1.84, (8, 32): 3.48},
    "Transformer-48": {(2, 1): 1.0, (4, 1): 1.07, (8, 1): 1.3,
                       (2, 4): 1.7, (4, 4): 3.2, (8, 4): 4.8,
                       (2, 32): 1.8, (4, 32): 3.4, (8, 32): 6.3},
}
# Table 3 (M = 32): {model: {K: normalised throughput}}.
TABLE3 = {
    "AmoebaNet-D (18, 128)": {2: 1.0, 4: 1.7, 8: 2.7},
    "Transformer-24": {2: 1.0, 4: 1.8, 8: 3.3},
}


def balanced_partition(costs: list[float], stages: int) -> list[int]:
    """Layer counts of `stages` contiguous stages (each >= 1 layer) minimising the largest stage
    sum. Among optimal partitions the later stages take as many layers as the optimum allows, the
    rule workloads/partition.h states for ppbench's own balanced partition."""
    n = len(costs)
    if stages < 1 or stages > n:
        raise ValueError(f"cannot split {n} layers into {stages} stages (allowed: 1..{n})")
    back = list(reversed(costs))
    prefix = [0.0]
    for c in back:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[k][i]: the smallest largest-stage sum of the first i (reversed) layers in k stages.
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n + 1):
            best[k][i] = min(max(best[k - 1][j], prefix[i] - prefix[j]) for j in range(k - 1, i))
    limit = best[stages][n] * (1 + 1e-12)
    # Greedy from the (reversed) front: the longest stage under the optimum that leaves a layer
    # for each stage still to come. Fewer layers left never makes the rest harder to split, so the
    # longest choice keeps the rest feasible whenever any choice does.
    counts, start = [], 0
    for k in range(stages, 0, -1):
        end = start + 1
        while end < n - (k - 1) and prefix[end + 1] - prefix[start] <= limit:
            end += 1
        counts.append(end - start)
        start = end
    return list(reversed(counts))


def stage_sums(layers: list[dict], counts: list[int]) -> list[dict]:
    """Per stage the sums of its layers' F, B and optimizer step (seconds; a layer profiled
    without an optimizer step counts 0 for it)."""
    out, start = [], 0
    for c in counts:
        part = layers[start:start + c]
        out.append({"F": sum(x["F"] for x in part), "B": sum(x["B"] for x in part),
                    "optimizer": sum(x.get("optimizer", 0.0) for x in part)})
        start += c
    return out


def expand_layers(full_signatures: list[str], profiled: dict[str, dict]) -> list[dict]:
    """The full model's per-layer times from the profiled model's: a layer takes the time of the
    profiled layer with its signature (same kind, shapes, FLOPs and parameters). KeyError naming
    the first layer no profiled layer matches."""
    out = []
    for i, sig in enumerate(full_signatures):
        if sig not in profiled:
            raise KeyError(f"layer {i} ({sig}) has no profiled layer of the same shape")
        out.append(dict(profiled[sig]))
    return out


def median_layers(repeats: list[dict[str, dict]]) -> dict[str, dict]:
    """Each layer's F, B and optimizer step as the median over repeated profiles (signature ->
    {"name", "F", "B", "optimizer"}): on a shared machine one profile can be a third slower than
    the next, and the median of a few is what a later profile reproduces. Every repeat must hold
    the same layers."""
    if not repeats:
        raise ValueError("no profile to take the median of")
    keys = set(repeats[0])
    for i, r in enumerate(repeats[1:], 1):
        if set(r) != keys:
            raise ValueError(f"profile {i} times other layers than profile 0")
    return {k: {"name": repeats[0][k]["name"], "F": median(r[k]["F"] for r in repeats),
                "B": median(r[k]["B"] for r in repeats),
                "optimizer": median(r[k].get("optimizer", 0.0) for r in repeats)}
            for k in repeats[0]}


def pooled_step_time(step_times: list[list[float]]) -> float:
    """The step time of a point measured by several runs: the median of all their measured
    steps together (a slow run or a slow step moves it by one place, not by its size)."""
    pooled = [t for run in step_times for t in run]
    if not pooled or any(not t > 0 for t in pooled):
        raise ValueError(f"step times must be positive numbers, got {step_times!r}")
    return median(pooled)


def normalise(values: dict, base_key) -> dict:
    """Each value divided by values[base_key] (the paper's K = 2 or K = 2, M = 1 cell = 1)."""
    base = values[base_key]
    if not base or base <= 0:
        raise ValueError(f"cannot normalise by {base!r} at {base_key!r}")
    return {k: v / base for k, v in values.items()}


def table2_rows(model: str, predicted: dict, measured: dict | None = None,
                cuda: dict | None = None) -> list[dict]:
    """Rows (one per M) of Table 2 for one model: per K the paper's figure and ppbench's
    predicted (and, where given, measured or CUDA) normalised throughput. `predicted`, `measured`
    and `cuda` map (K, M) to throughput in samples per second, unnormalised."""
    pred = normalise(predicted, (2, 1))
    meas = normalise(measured, (2, 1)) if measured and (2, 1) in measured else {}
    gpu = normalise(cuda, (2, 1)) if cuda and (2, 1) in cuda else {}
    rows = []
    for m in MS:
        cells = {}
        for k in KS:
            cells[str(k)] = {"paper": TABLE2[model][(k, m)], "predicted": pred.get((k, m)),
                             "measured": meas.get((k, m)), "cuda": gpu.get((k, m))}
        rows.append({"M": m, "cells": cells})
    return rows


def table3_row(model: str, predicted: dict) -> dict:
    """Table 3's row for one model: per K (M = 32) the paper's and the predicted normalised
    throughput; `predicted` maps K to samples per second."""
    pred = normalise(predicted, 2)
    return {"model": model,
            "cells": {str(k): {"paper": TABLE3[model][k], "predicted": pred[k]} for k in KS}}


def scaling_series(devices: Iterable[int], throughput: dict[int, float]) -> dict:
    """Throughput against devices beside the ideal: linear from the one-device point."""
    ds = sorted(devices)
    one = throughput[ds[0]] / ds[0]
    return {"devices": ds, "throughput": [throughput[d] for d in ds],
            "ideal": [one * d for d in ds]}


def rises(values: list[float]) -> bool:
    """Whether each value is above the one before it."""
    return all(b > a for a, b in zip(values, values[1:]))


def trends(rows: list[dict], column: str) -> dict:
    """Of Table 2 rows (table2_rows) for one column ("paper" or "predicted"): whether throughput
    rises with K at M = 32, with M at K = 8, and how much K = 8 gains over K = 2 at M = 32."""
    by_m = {r["M"]: r["cells"] for r in rows}
    top = by_m[MS[-1]]
    return {"rises_with_K_at_M32": rises([top[str(k)][column] for k in KS]),
            "rises_with_M_at_K8": rises([by_m[m][str(KS[-1])][column] for m in MS]),
            "K8_over_K2_at_M32": top[str(KS[-1])][column] / top[str(KS[0])][column]}


TPU_VS_CPU = (
    "On the TPU v3 pod each added partition brings its own core, memory and interconnect, so K "
    "partitions are K times the compute and the paper's throughput can grow with K; ppbench's "
    "simulator assumes the same (one device per rank), which is why its prediction can grow too. "
    "ppbench's CPU ranks are threads on a fixed set of cores: at K = 2 on a 2-core machine each "
    "rank has a core, but more ranks would share the same cores (oversubscribed) and could not "
    "add compute, so measured CPU throughput can only follow the K = 2 column, i.e. the gain "
    "from more micro-batches filling the pipeline.")
