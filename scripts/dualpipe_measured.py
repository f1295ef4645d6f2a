#!/usr/bin/env python3
"""The DualPipe paper's comparison, measured: 1F1B, ZB1P, DualPipe and DualPipeV run for real.

The DeepSeek-V3 Technical Report (DeepSeek-AI, arXiv 2412.19437, section 3.2.1, Table 2) and the
README of its reference implementation (deepseek-ai/DualPipe, which adds the DualPipeV row: the
same stages folded onto PP/2 devices) compare the schedules by

  Method     Bubble               Parameter  Activation  Devices
  1F1B       (PP-1)(F+B)          1x         PP          PP
  ZB1P       (PP-1)(F+B-2W)       1x         PP          PP
  DualPipe   (PP/2-1)(F&B+B-3W)   2x         PP+1        PP
  DualPipeV  (PP/2-1)(F&B+B-3W)   2x         PP+1        PP/2

with F a stage's forward, B its full backward, W its weight-gradient pass and F&B an overlapped
forward + backward pair; Parameter is per device relative to 1F1B on PP devices, Activation the
peak count of one stage's micro-batch activations on a device. Section 2 of results/REPORT.md
evaluates these from ppbench's closed forms and simulator; this script adds the measured side.

Each point is `ppbench run --backend cpu` (one thread per rank, `--optimizer none`: the paper's
table is about the pipeline, not the update) repeated --repeats times, with
`--profile-out` for the per-stage median F, I, W, B and FB of the run's last measured step, and
`ppbench memory` of the same configuration for the parameters each rank holds (`run` records no
per-rank parameter count, so this column is counted from the partition, not measured). Per point:

  bubble      the measured idle per rank (makespan - busy, seconds, last measured step, median
              over the repeats) beside the paper's formula evaluated with the run's own measured
              F, B, W, F&B (means over the stages of the per-stage medians), in seconds and in
              units of the measured F; the simulator's replay of the same step beside them.
              B is the median of the stage's whole backwards; a stage whose backwards are all
              split (ZB1P's) has none, and its B is I + W; 1F1B's W is B/2 by convention
              (`w_measured`) and FB is F + B where no pair ran (`fb_measured`);
  parameter   the most parameters a rank holds, relative to 1F1B with the same PP stages;
  activation  the record's measured_peak_bytes per rank, in units of one stage's micro-batch
              activation (the model's per-layer activation bytes summed per partition stage,
              the mean over the stages the rank holds), beside PP or PP+1 and the most
              (stage, micro-batch) activations the trace shows alive on a rank.

Two comparisons by default, sharing the DualPipeV run: the paper's, at equal PP = 4 stages
(1F1B, ZB1P and DualPipe on 4 ranks, DualPipeV on 2), and one at equal ranks D = 2 (PP = 2, and
PP = 4 for DualPipeV), where no rank shares a core on a 2-core machine. A point with more ranks
than the machine has cores is marked oversubscribed: its threads share cores and its measured
times include waiting for one.

Writes results/reference/dualpipe_measured.json (atomically) with every run's provenance
(commit, host, CPU, load average) and the load average before and after. Not run in CI (it
measures, and needs a built ppbench). Keep the machine quiet; the numbers are this machine's.

  scripts/dualpipe_measured.py --ppbench build/ppbench
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from results_io import atomic_write, load_average, ppbench_json
from script_cli import OneLineParser, ScriptError, number, output_path, run

SOURCE = ("DeepSeek-AI, DeepSeek-V3 Technical Report (arXiv 2412.19437), section 3.2.1, Table 2; "
          "deepseek-ai/DualPipe README (the DualPipeV row)")

# (the paper's method, ppbench's schedule)
METHODS = [("1F1B", "1f1b"), ("ZB1P", "zb-h1"), ("DualPipe", "dualpipe"),
           ("DualPipeV", "dualpipev")]

# The paper's table as it prints it; paper_bubble() evaluates the bubble column.
PAPER_TABLE = {
    "1F1B": {"bubble": "(PP-1)(F+B)", "params": "1x", "activation": "PP", "devices": "PP"},
    "ZB1P": {"bubble": "(PP-1)(F+B-2W)", "params": "1x", "activation": "PP", "devices": "PP"},
    "DualPipe": {"bubble": "(PP/2-1)(F&B+B-3W)", "params": "2x", "activation": "PP+1",
                 "devices": "PP"},
    "DualPipeV": {"bubble": "(PP/2-1)(F&B+B-3W)", "params": "2x", "activation": "PP+1",
                  "devices": "PP/2"},
}

# Eight equal 1024-wide blocks and the small classifier head: the balanced partition gives every
# stage the same blocks at PP = 2 and 4 (the head rides on the last stage), each block's matrix
# products (67 MFLOP per pass at b = 32) last milliseconds, far above the hand-overs.
DEFAULT_WORKLOAD = "--workload mlp --layers 9 --width 1024 -b 32 --dtype f32"
DEFAULT_COMPARISONS = "pp4,d2"


# --- the paper's table (pure) ----------------------------------------------------------------

def paper_bubble(method: str, pp: int, c: dict[str, float]) -> float:
    """The paper's bubble for PP stages and costs c (F, B, W, FB), in c's units."""
    f, b, w, fb = c["F"], c["B"], c["W"], c["FB"]
    if method == "1F1B":
        return (pp - 1) * (f + b)
    if method == "ZB1P":
        return (pp - 1) * (f + b - 2 * w)
    if method in ("DualPipe", "DualPipeV"):
        return (pp / 2 - 1) * (fb + b - 3 * w)
    raise ValueError(f"unknown method {method!r}: one of {', '.join(PAPER_TABLE)}")


def paper_params(method: str) -> float:
    """Parameters per device relative to 1F1B on PP devices, as the paper states it."""
    return float(PAPER_TABLE[method]["params"].rstrip("x"))


def paper_activation(method: str, pp: int) -> int:
    """Peak activations per device in units of one stage's micro-batch activation."""
    return pp + 1 if PAPER_TABLE[method]["activation"] == "PP+1" else pp


def devices_for(schedule: str, pp: int) -> int:
    """Ranks that run PP stages: DualPipeV folds them onto PP/2, the others use one per stage."""
    return pp // 2 if schedule == "dualpipev" else pp


def stages_for(schedule: str, devices: int) -> int:
    """PP, the pipeline stages a schedule runs on `devices` ranks."""
    return 2 * devices if schedule == "dualpipev" else devices


# --- reading the measurements (pure) ---------------------------------------------------------

def median(xs: list[float]) -> float:
    if not xs:
        raise ValueError("median of no values")
    return float(statistics.median(xs))


def mean_costs(profile: dict) -> dict[str, float]:
    """F, I, W, B, FB of a `run --profile-out` profile: the mean over its stages of the per-stage
    medians (the paper's formulas assume equal stages)."""
    stages = profile.get("stages") or []
    if not stages:
        raise ValueError("the profile has no stages")
    return {k: sum(float(s[k]) for s in stages) / len(stages) for k in ("F", "I", "W", "B", "FB")}


def median_costs(costs: list[dict[str, float]]) -> dict[str, float]:
    """The median over repeated runs of each cost."""
    return {k: median([c[k] for c in costs]) for k in costs[0]}


def rank_values(record: dict, part: str, key: str) -> list[float]:
    """Per rank (in rank order) `key` of the record's `part` ("measured" or "predicted")."""
    ranks = sorted((record.get(part) or {}).get("ranks") or [], key=lambda r: r.get("rank", 0))
    return [float(r[key]) for r in ranks if isinstance(r.get(key), (int, float))]


def per_rank_median(lists: list[list[float]]) -> list[float]:
    """Rank by rank, the median over runs."""
    return [median(list(v)) for v in zip(*lists)]


def activation_peaks(record: dict) -> list[int]:
    """measured_peak_bytes per rank, in rank order."""
    rows = sorted(record.get("activation_bytes") or [], key=lambda a: a.get("rank", 0))
    return [int(a["measured_peak_bytes"]) for a in rows]


def stage_activation_bytes(layer_bytes: list[int], layer_counts: list[int]) -> list[int]:
    """Per partition stage, what F keeps for one micro-batch: its layers' bytes summed."""
    if sum(layer_counts) != len(layer_bytes):
        raise ValueError(f"the partition {layer_counts} does not cover {len(layer_bytes)} layers")
    out, first = [], 0
    for count in layer_counts:
        out.append(sum(layer_bytes[first:first + count]))
        first += count
    return out


def rank_units(memory: dict, stage_bytes: list[int]) -> list[float]:
    """Per rank, one stage's micro-batch activation: the mean over the partition stages it holds
    (`ppbench memory`'s parts), so that a rank whose stages are larger (the head's) is measured
    in its own stages."""
    ranks = sorted(memory["ranks"], key=lambda r: r["rank"])
    return [sum(stage_bytes[p] for p in r["parts"]) / len(r["parts"]) for r in ranks]


def param_counts(memory: dict) -> list[int]:
    """Parameters each rank holds (every copy counted), from `ppbench memory --format json`."""
    return [int(r["param_count"]) for r in sorted(memory["ranks"], key=lambda r: r["rank"])]


def summarize(method: str, schedule: str, devices: int, records: list[dict],
              profiles: list[dict], memory: dict, baseline_memory: dict,
              units: list[float], cores: int) -> dict:
    """One row of a comparison from its repeated runs, their profiles and the memory model."""
    pp = stages_for(schedule, devices)
    costs = median_costs([mean_costs(p) for p in profiles])
    formula = paper_bubble(method, pp, costs)
    idle_runs = [rank_values(r, "measured", "idle") for r in records]
    idle = per_rank_median(idle_runs)
    predicted = per_rank_median([rank_values(r, "predicted", "idle") for r in records])
    peaks = per_rank_median([[float(x) for x in activation_peaks(r)] for r in records])
    params = param_counts(memory)
    baseline = max(param_counts(baseline_memory))
    return {
        "method": method, "schedule": schedule, "devices": devices, "pp": pp,
        "oversubscribed": devices > cores,
        "repeats": len(records),
        "costs_s": costs,
        # 1F1B never splits its backward: its profile's W is B/2 by convention, not a timing.
        "w_measured": schedule != "1f1b",
        # Only the dual schedules run F&B pairs; elsewhere the profile's FB is F + B.
        "fb_measured": schedule in ("dualpipe", "dualpipev"),
        "stage_costs_s": [p["stages"] for p in profiles],
        "bubble": {
            "paper_formula": PAPER_TABLE[method]["bubble"],
            "formula_s": formula,
            "formula_in_F": formula / costs["F"],
            "measured_idle_per_rank_s": idle,
            "measured_idle_max_s": max(idle),
            "measured_idle_max_in_F": max(idle) / costs["F"],
            "measured_idle_max_per_run_s": [max(x) for x in idle_runs],
            "predicted_idle_per_rank_s": predicted,
            "predicted_idle_max_s": max(predicted) if predicted else None,
            "makespan_s": median([float(r["measured"]["makespan"]) for r in records]),
            "bubble_fraction": median([float(r["measured"]["bubble_fraction"])
                                       for r in records]),
        },
        "params": {
            "paper": PAPER_TABLE[method]["params"],
            "per_rank": params,
            "baseline_1f1b_max": baseline,
            "relative_to_1f1b": max(params) / baseline,
            "source": "ppbench memory (counted from the partition)",
        },
        "activations": {
            "paper": PAPER_TABLE[method]["activation"],
            "paper_value": paper_activation(method, pp),
            "stage_activation_bytes_per_rank": units,
            "measured_peak_bytes_per_rank": peaks,
            "measured_peak_units_per_rank": [p / u for p, u in zip(peaks, units)],
            "measured_peak_units_max": max(p / u for p, u in zip(peaks, units)),
            "peak_count_per_rank": per_rank_median(
                [rank_values(r, "measured", "peak_activations") for r in records]),
        },
        "step_time_s": median([float(r["step_time_s"]) for r in records]),
        "runs": [{"provenance": r.get("provenance"), "step_time_s": r.get("step_time_s"),
                  "measured_idle_per_rank_s": rank_values(r, "measured", "idle")}
                 for r in records],
    }


def comparison_points(name: str) -> tuple[str, list[tuple[str, str, int]]]:
    """(title, [(method, schedule, devices)]) of a comparison: ppN (the paper's, equal PP = N
    stages) or dN (equal ranks D = N)."""
    kind = "pp" if name.startswith("pp") else "d" if name.startswith("d") else ""
    count = name[len(kind):]
    if not kind or not count.isdigit() or int(count) < 2 or int(count) % 2:
        raise ValueError(f"bad comparison {name!r}: ppN (equal PP = N stages) or dN (equal "
                         "ranks D = N), N an even number >= 2")
    n = int(count)
    if kind == "pp":
        return (f"PP = {n} stages (the paper's comparison: DualPipeV on PP/2 = {n // 2} ranks)",
                [(m, s, devices_for(s, n)) for m, s in METHODS])
    return (f"D = {n} ranks (equal ranks: PP = {n}, and PP = {2 * n} for DualPipeV)",
            [(m, s, n) for m, s in METHODS])


def comparison_list(text: str) -> list[str]:
    """An argparse type: a comma-separated, non-empty list of comparison names (ppN, dN)."""
    names = [c.strip() for c in text.split(",") if c.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"'{text}' names no comparison (allowed: ppN, dN)")
    for name in names:
        try:
            comparison_points(name)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return names


# --- running ppbench -------------------------------------------------------------------------

def measure(ppbench: str, workload: list[str], schedule: str, devices: int, n: int, steps: int,
            warmup: int) -> tuple[dict, dict]:
    """One `ppbench run`: its record and its measured profile."""
    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "profile.json"
        record = ppbench_json(ppbench, [
            "run", "--backend", "cpu", *workload, "--schedule", schedule, "--devices",
            str(devices), "--microbatches", str(n), "--steps", str(steps), "--warmup",
            str(warmup), "--optimizer", "none", "--format", "json", "--profile-out",
            str(profile)])
        return record, json.loads(profile.read_text(encoding="utf-8"))


def memory_json(ppbench: str, workload: list[str], schedule: str, devices: int,
                n: int) -> dict:
    return ppbench_json(ppbench, ["memory", *workload, "--schedule", schedule, "--devices",
                                  str(devices), "--microbatches", str(n), "--optimizer", "none",
                                  "--format", "json"])


def layer_activation_bytes(ppbench: str, workload: list[str]) -> list[int]:
    """What each layer keeps from F for its backward, per micro-batch (`ppbench model`)."""
    model = ppbench_json(ppbench, ["model", *workload, "--format", "json"])
    return [int(layer["activation_bytes"]["B"]) for layer in model["layers"]]


def build(ppbench: str, workload: list[str], n: int, steps: int, warmup: int, repeats: int,
          comparisons: list[str]) -> dict:
    cores = os.cpu_count() or 1
    plans = [comparison_points(c) for c in comparisons]
    layers = layer_activation_bytes(ppbench, workload)
    # Every point through `ppbench simulate` first (instant): the registry refuses one it does
    # not allow (N < 2D for DualPipe) before a minute of measuring is spent on the others.
    for _, points in plans:
        for _, schedule, devices in points:
            ppbench_json(ppbench, ["simulate", "--schedule", schedule, "--devices", str(devices),
                                   "--microbatches", str(n), "--format", "json"])
    load_before = load_average(2)
    runs: dict[tuple[str, int], tuple[list[dict], list[dict]]] = {}
    for _, points in plans:
        for _, schedule, devices in points:
            if (schedule, devices) in runs:
                continue  # a point two comparisons share is run once
            records, profiles = [], []
            for k in range(repeats):
                record, profile = measure(ppbench, workload, schedule, devices, n, steps, warmup)
                records.append(record)
                profiles.append(profile)
                print(f"{schedule} D={devices} run {k + 1}/{repeats}: step "
                      f"{record['step_time_s'] * 1e3:.1f} ms, load "
                      f"{record['provenance'].get('load_average')}", file=sys.stderr)
            runs[(schedule, devices)] = (records, profiles)
    load_after = load_average(2)
    out = []
    for title, points in plans:
        rows = []
        for method, schedule, devices in points:
            records, profiles = runs[(schedule, devices)]
            pp = stages_for(schedule, devices)
            memory = memory_json(ppbench, workload, schedule, devices, n)
            baseline = memory_json(ppbench, workload, "1f1b", pp, max(n, pp))
            units = rank_units(memory, stage_activation_bytes(
                layers, memory["partition"]["layer_counts"]))
            rows.append(summarize(method, schedule, devices, records, profiles, memory,
                                  baseline, units, cores))
        out.append({"title": title, "rows": rows})
    first = next(iter(runs.values()))[0][0]
    prov = first.get("provenance") or {}
    return {
        "source": SOURCE,
        "paper_table": PAPER_TABLE,
        "config": {"workload": " ".join(workload), "microbatches": n, "steps": steps,
                   "warmup": warmup, "repeats": repeats, "optimizer": "none",
                   "backend": "cpu"},
        "provenance": {"git_commit": prov.get("git_commit"),
                       "source_tree_commit": prov.get("source_tree_commit"),
                       "host": prov.get("host"),
                       "cpu": prov.get("cpu"), "cpu_cores": prov.get("cpu_cores"),
                       "load_average_before": load_before, "load_average_after": load_after},
        "comparisons": out,
    }


def main(argv: list[str] | None = None) -> int:
    """Exit 0 with the table written; a bad option raises SystemExit(2) and an unwritable --out
    InputError (exit 2 through run), both before any run; ppbench's refusal of a point is a
    PpbenchError with its own status (2: the caller's input, 3: the machine)."""
    parser = OneLineParser(prog="dualpipe_measured", description=__doc__.splitlines()[0],
                           epilog=__doc__.split("\n\n", 1)[1],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ppbench", default="build/ppbench", help="(default: %(default)s)")
    parser.add_argument("--out", type=Path,
                        default=Path("results/reference/dualpipe_measured.json"),
                        help="(default: %(default)s)")
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD,
                        help="workload flags of run, memory and model (default: %(default)s)")
    parser.add_argument("-n", "--microbatches", type=number(int, 2), default=8,
                        help="N, at least 2D for DualPipe (default: %(default)s)")
    parser.add_argument("--steps", type=number(int, 1), default=3,
                        help="measured steps (default: %(default)s)")
    parser.add_argument("--warmup", type=number(int, 0), default=1, help="(default: %(default)s)")
    parser.add_argument("--repeats", type=number(int, 1), default=5,
                        help="runs per point (default: %(default)s)")
    parser.add_argument("--comparisons", type=comparison_list, default=DEFAULT_COMPARISONS,
                        help="ppN: equal PP = N stages (the paper's); dN: equal ranks D = N "
                             "(default: %(default)s)")
    args = parser.parse_args(argv)
    output_path(args.out, "--out")
    try:
        table = build(args.ppbench, args.workload.split(), args.microbatches, args.steps,
                      args.warmup, args.repeats, args.comparisons)
    except (RuntimeError, ValueError, KeyError, TypeError) as e:
        # ppbench's records do not fit together (a profile without stages, a partition that
        # does not cover the model): the program's failure, not the caller's input.
        raise ScriptError(f"ppbench's records do not fit together: {type(e).__name__}: {e}",
                          1) from None
    atomic_write(args.out, json.dumps(table, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run("dualpipe_measured", main))
