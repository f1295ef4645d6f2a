#!/usr/bin/env python3
"""GPipe's Tables 2 and 3 and the 1F1B throughput-scaling figure, reproduced side by side.

Huang et al., GPipe (NeurIPS 2019), Table 2: normalised training throughput of AmoebaNet-D(18, 256)
and Transformer-48 on TPU v3 for K = 2, 4, 8 partitions x M = 1, 4, 32 micro-batches; Table 3: the
same on P100 GPUs, M = 32, for AmoebaNet-D(18, 128) and Transformer-24. A cell of Table 2 is
normalised by the model's K = 2, M = 1 cell, one of Table 3 by its K = 2 cell (M = 32, the table's
only M). This script sets beside them:

  predicted  `ppbench simulate --schedule gpipe` on the full shapes with per-layer F and B
             measured on this machine's CPU at micro-batch 1 (the full shapes are too slow to
             time at the paper's batch sizes here). Each distinct layer is timed in a profile
             run at D = 1 of a shorter model of the same shape (one transformer layer; AmoebaNet
             with four normal cells per group, which holds every distinct cell: the first two
             after a reduction, a middle one and the last before the head), one layer per stage
             (`run --schedule looped-bfs -d 1 -v L --partition 1,...,1 --profile-out`, one step
             after a warm-up step), taking the median of 3 such runs (5 for the smaller shapes);
             the full model's layers take the time of the profiled layer with the same shape
             (kind, FLOPs, parameters, activation and boundary bytes). Stages: the balanced
             partition of F + B (gpipe_tables_data.balanced_partition), handed to simulate as a
             measured device profile with no hand-over time (ranks share memory) and each
             stage's optimizer step, the profiled layers' AdamW updates summed (run's default
             optimizer, which the real runs below take too).
  measured   real `ppbench run --schedule gpipe -d 2` on this CPU (K = 2 <= its cores) for
             smaller shapes of the same models, normalised the same way, beside the simulator's
             prediction for those shapes from their own per-layer profile. A point's step time
             is the median of 25 measured steps: 5 runs of 5 steps after 2 warm-up steps, the
             runs taken in rounds over M = 1, 4, 32 so that a slow spell of a shared machine
             falls on every point alike.
  cuda       the same smaller shapes on one GPU split into K virtual devices of a fixed size
             each (--sms-per-device), so that each added partition adds compute as a TPU core
             does: rows of scripts/gpu_tables.py (gpu-check's `tables` part) found by
             --gpu-rows, at K = 2, 4, 8 x M = 1, 4, 32; none are invented, and a table without
             such rows says so. The cells come from one session (gpu_section says which), never
             normalised against another session's; the others are named as not used.

The scaling figure: 1F1B on the small transformer at a fixed global batch (N micro-batches of
size 1), measured at D = 1, 2 (each rank a thread on its own core), the ideal (D x the D = 1
throughput) and the simulator's prediction from the profiled per-layer costs for D = 1..8; and,
where gpu_tables.py rows exist, the same on fixed-size virtual devices of one GPU at D = 1..8.

Writes results/reference/gpipe_tables.json and plots/reference/gpipe_1f1b_scaling.png. Not run in
CI (it measures); `--reuse FILE` takes the layer profiles and runs from an earlier json and only
redoes the simulation and the outputs (and reads the GPU rows again: after a GPU session,
`--reuse results/reference/gpipe_tables.json` adds them without timing the CPU again). The
measurements are kept in OUT's sibling OUT.data.json (gpipe_tables.data.json) from the end of the
timing until OUT is written whole, so that a simulation that fails can be redone with `--reuse
OUT.data.json`; OUT itself is only ever written whole.

  scripts/gpipe_tables.py --ppbench build/ppbench
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import json
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from gpipe_tables_data import KS, MS, PAPER, TABLE2, TABLE3, TPU_VS_CPU, balanced_partition, \
    expand_layers, median_layers, normalise, pooled_step_time, scaling_series, stage_sums, \
    table2_rows, table3_row, trends
from results_io import atomic_savefig, atomic_write, figure_path, load_average, load_rows, \
    ppbench_json, pyplot
from script_cli import InputError, OneLineParser, ScriptError, json_kind, output_path, read_json, \
    run, shaped

IMAGE = ["--image-size", "224", "--classes", "1000"]
# Full shapes (GPipe section 3 / REFERENCE.md) and the shorter models whose layers are timed.
FULL = {
    "AmoebaNet-D (18, 256)": (["--workload", "amoebanet", "--layers", "18", "--filters", "256",
                               *IMAGE], ["--layers", "12"]),
    "Transformer-48": (["--workload", "transformer", "--preset", "gpipe-transformer"],
                       ["--layers", "1"]),
    "AmoebaNet-D (18, 128)": (["--workload", "amoebanet", "--layers", "18", "--filters", "128",
                               *IMAGE], ["--layers", "12"]),
    "Transformer-24": (["--workload", "transformer", "--preset", "gpipe-transformer",
                        "--layers", "24"], ["--layers", "1"]),
}
# Smaller shapes of the same models for real runs on the CPU (K = 2).
SMALL = {
    "AmoebaNet-D (6, 32), 64x64": ["--workload", "amoebanet", "--layers", "6", "--filters", "32",
                                   "--image-size", "64", "--classes", "10"],
    "Transformer-8 (h 256, seq 128)": ["--workload", "transformer", "--preset",
                                       "gpipe-transformer", "--layers", "8", "--hidden", "256",
                                       "--ffn", "1024", "--heads", "4", "--kv-heads", "4",
                                       "--vocab", "1000", "--seq", "128"],
}
SMALL_OF = {"AmoebaNet-D (18, 256)": "AmoebaNet-D (6, 32), 64x64",
            "Transformer-48": "Transformer-8 (h 256, seq 128)"}
SCALING_MODEL = "Transformer-8 (h 256, seq 128)"
SCALING_N = 8
SCALING_MEASURED_D = (1, 2)
SCALING_PREDICTED_D = (1, 2, 4, 8)
# How much is timed. This is a shared machine whose speed moves by a third between runs a minute
# apart: a layer profile is the median of a few, each after a warm-up step; a real run's point is
# the median of the measured steps of several runs, taken in rounds over the points.
PROFILE_WARMUP = 1
FULL_PROFILE_REPEATS, SMALL_PROFILE_REPEATS = 3, 5
RUN_STEPS, RUN_WARMUP, RUN_REPEATS = 5, 2, 5


def with_flag(flags: list[str], name: str, value: str) -> list[str]:
    """`flags` with `name` set to `value` (replaced where present)."""
    out = list(flags)
    if name in out:
        out[out.index(name) + 1] = value
    else:
        out += [name, value]
    return out


def signature(layer: dict) -> str:
    """What makes two layers take the same time: all of the spec but the name."""
    return json.dumps({k: layer[k] for k in ("kind", "params", "flops", "activation_bytes",
                                             "boundary")}, sort_keys=True)


def model_spec(ppbench: str, flags: list[str]) -> dict:
    # f32: the CPU executor's dtype (model's own default is bf16).
    return ppbench_json(ppbench, ["model", *flags, "-b", "1", "--dtype", "f32", "--format",
                                  "json"])


def profile_layers(ppbench: str, flags: list[str], microbatches: int, repeats: int) -> dict:
    """Times every layer of the model `flags` names: D = 1, one layer per stage, one step after
    PROFILE_WARMUP, the median over `microbatches`; `repeats` times, each layer's F and B the
    median over the repeats. Keyed by layer signature."""
    spec = model_spec(ppbench, flags)
    n = len(spec["layers"])
    per_repeat, totals = [], []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.json"
        args = ["run", *flags, "-b", "1", "--schedule", "looped-bfs", "-d", "1", "-v", str(n),
                "--partition", ",".join(["1"] * n), "-n", str(microbatches), "--steps", "1",
                "--warmup", str(PROFILE_WARMUP), "--profile-out", str(out), "--format", "json"]
        before = load_average()
        for _ in range(repeats):
            record = ppbench_json(ppbench, args)
            stages = json.loads(out.read_text(encoding="utf-8"))["stages"]
            per_repeat.append({signature(layer): {"name": layer["name"], "F": stage["F"],
                                                  "B": stage["B"],
                                                  "optimizer": stage.get("optimizer", 0.0)}
                               for layer, stage in zip(spec["layers"], stages)})
            totals.append(sum(stage["F"] + stage["B"] for stage in stages))
    return {"command": "ppbench " + " ".join(args), "repeats": repeats,
            "layers": median_layers(per_repeat), "repeat_totals_s": totals,
            "load_average_before": before, "load_average_after": load_average(),
            "provenance": record.get("provenance", {})}


def measured_profile(spec: dict, counts: list[int], stages: list[dict]) -> dict:
    """A device profile of kind "measured" for `spec` partitioned as `counts` (no hand-over)."""
    return {"format": "ppbench-device-profile", "version": 1, "kind": "measured",
            "name": "per-layer CPU times summed per stage (scripts/gpipe_tables.py)",
            "time_unit": "s", "granularity": "stage", "workload": spec["workload"],
            "workload_config": spec["config"], "microbatch_size": spec["microbatch_size"],
            "dtype": spec["dtype"], "layer_counts": counts,
            "stages": [{"F": s["F"], "I": s["B"] / 2, "W": s["B"] / 2, "B": s["B"],
                        "FB": s["F"] + s["B"], "comm": 0.0, "optimizer": s["optimizer"]}
                       for s in stages]}


def predict(ppbench: str, flags: list[str], layers: list[dict], spec: dict, schedule: str,
            devices: int, microbatches: int) -> dict:
    """`simulate` of `schedule` on the balanced partition of `layers`; samples per second."""
    counts = balanced_partition([x["F"] + x["B"] for x in layers], devices)
    profile = measured_profile(spec, counts, stage_sums(layers, counts))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.json"
        path.write_text(json.dumps(profile), encoding="utf-8")
        j = ppbench_json(ppbench, ["simulate", "--schedule", schedule, "-d", str(devices), "-n",
                                   str(microbatches), *flags, "-b", "1", "--device-profile",
                                   str(path), "--format", "json"])
    return {"K": devices, "M": microbatches, "layer_counts": counts, "makespan": j["makespan"],
            "bubble_fraction": j["bubble_fraction"],
            "samples_per_s": microbatches / j["makespan"]}


def full_layers(ppbench: str, flags: list[str], profile: dict) -> tuple[dict, list[dict]]:
    spec = model_spec(ppbench, flags)
    return spec, expand_layers([signature(x) for x in spec["layers"]], profile["layers"])


def run_args(flags: list[str], schedule: str, devices: int, microbatches: int) -> list[str]:
    return ["run", *flags, "-b", "1", "--schedule", schedule, "-d", str(devices), "-n",
            str(microbatches), "--steps", str(RUN_STEPS), "--warmup", str(RUN_WARMUP),
            "--format", "json"]


def measure_points(ppbench: str, flags: list[str], schedule: str,
                   points: list[tuple[int, int]]) -> list[dict]:
    """Real runs of `schedule` at each (devices, microbatches) point, RUN_REPEATS rounds of
    every point in turn (a slow spell of the machine then falls on all points, not on one); a
    point's step time is the median of all its measured steps (pooled_step_time)."""
    args = {p: run_args(flags, schedule, *p) for p in points}
    steps: dict[tuple[int, int], list[list[float]]] = {p: [] for p in points}
    provenance: dict[tuple[int, int], dict] = {}
    before = load_average()
    for _ in range(RUN_REPEATS):
        for p in points:
            r = ppbench_json(ppbench, args[p])
            steps[p].append([float(t) for t in r["step_times_s"]])
            provenance.setdefault(p, r.get("provenance", {}))
    after = load_average()
    out = []
    for (d, m), runs in steps.items():
        t = pooled_step_time(runs)
        out.append({"K": d, "M": m, "command": "ppbench " + " ".join(args[(d, m)]),
                    "repeats": RUN_REPEATS, "step_times_s": runs, "step_time_s": t,
                    "samples_per_s": m / t, "load_average_before": before,
                    "load_average_after": after, "provenance": provenance[(d, m)]})
    return out


GPU_ROWS = "results/gpu/*/tables/gpu_tables.jsonl"


# What gpu_section reads of an ok row of scripts/gpu_tables.py.
GPU_TABLE_FIELDS = {"label": str, "model": str, "schedule": str, "flags": str, "devices": int,
                    "microbatches": int, "sms_per_device": int}


def gpu_rows(pattern: str = GPU_ROWS) -> list[dict]:
    """The ok rows of scripts/gpu_tables.py in the files `pattern` matches, each with its
    "source_file"; within a file a later row of a point replaces an earlier one (the point run
    again). A line that is not a JSON object is skipped with a warning, as results_io.load_rows
    skips a line a killed writer left; an ok row without what gpu_section reads, or without a
    positive throughput to normalise, is an InputError naming its file."""
    rows: dict[tuple[str, str], dict] = {}
    for path in sorted(glob.glob(pattern)):
        for r in load_rows(Path(path)):
            g = r.get("gpu_table")
            if not isinstance(g, dict) or g.get("status") != "ok":
                continue
            for key, kind in GPU_TABLE_FIELDS.items():
                if not isinstance(g.get(key), kind) or isinstance(g.get(key), bool):
                    raise InputError(f"--gpu-rows file {path}: an ok row's gpu_table.{key} is "
                                     f"{g.get(key)!r}, not a {json_kind(kind)}")
            sps = (r.get("throughput") or {}).get("samples_per_s") \
                if isinstance(r.get("throughput"), dict) else None
            if not isinstance(sps, (int, float)) or isinstance(sps, bool) or sps <= 0:
                raise InputError(f"--gpu-rows file {path}: the ok row {g['label']} has "
                                 f"throughput.samples_per_s {sps!r}, not a positive number")
            for key in ("gpu", "provenance"):
                if key in r and not isinstance(r[key], dict):
                    raise InputError(f"--gpu-rows file {path}: the ok row {g['label']} has {key} "
                                     f"{r[key]!r}, not an object")
            rows[(path, g["label"])] = {**r, "source_file": path}
    return list(rows.values())


def gpu_name(row: dict) -> str:
    names = (row.get("gpu") or {}).get("gpu_names")
    return str(names[0]) if isinstance(names, list) and names else "?"


def row_date(row: dict) -> str:
    return str((row.get("provenance") or {}).get("date") or "")


def gpu_sessions(rows: list[dict]) -> tuple[list[dict], list[list[dict]]]:
    """The rows of the session the GPU grid is built from, and each other session's rows.

    A session is one file (one gpu-check run's folder) on one GPU at one device size: cells of
    two sessions ran on other SMs, builds or machines, so they are never normalised against each
    other. The session used is the one with the most points, of those the latest by its recorded
    date: a later partial run (a --filter, points that failed) does not hide a whole grid, and
    the report names every session left out."""
    sessions: dict[tuple[str, str, int], list[dict]] = {}
    for r in rows:
        key = (r["source_file"], gpu_name(r), r["gpu_table"]["sms_per_device"])
        sessions.setdefault(key, []).append(r)
    order = sorted(sessions, key=lambda k: (len(sessions[k]),
                                            max(row_date(r) for r in sessions[k]), k))
    return sessions[order[-1]], [sessions[k] for k in reversed(order[:-1])]


def session_summary(rows: list[dict]) -> dict:
    """Where a session ran: its file, GPU, device size, latest date and points."""
    return {"source": rows[0]["source_file"], "gpu": gpu_name(rows[0]),
            "sms_per_device": rows[0]["gpu_table"]["sms_per_device"],
            "date": max(row_date(r) for r in rows) or None, "points": len(rows)}


def gpu_cells(rows: list[dict], schedule: str, model: str) -> dict:
    """(D, N) -> samples per second of the GPU rows of `schedule` on exactly SMALL[model]."""
    flags = " ".join(SMALL[model])
    return {(r["gpu_table"]["devices"], r["gpu_table"]["microbatches"]):
            r["throughput"]["samples_per_s"] for r in rows
            if r["gpu_table"]["schedule"] == schedule and r["gpu_table"]["model"] == model
            and r["gpu_table"]["flags"] == flags}


def gpu_section(rows: list[dict]) -> dict | None:
    """The GPU grid of each smaller shape (normalised by its own K = 2, M = 1 run, as the paper
    normalises) and the GPU scaling series, all from one session (gpu_sessions), with the
    machine and commit it ran on and the sessions not used."""
    if not rows:
        return None
    used, others = gpu_sessions(rows)
    grids = []
    for name, sname in SMALL_OF.items():
        cells = gpu_cells(used, "gpipe", sname)
        if (2, 1) in cells:
            norm = normalise(cells, (2, 1))
            grids.append({"model": sname, "of": name,
                          "rows": [{"M": m, "cells": {str(k): norm.get((k, m)) for k in KS}}
                                   for m in MS]})
    scaling = {d: v for (d, n), v in gpu_cells(used, "1f1b", SCALING_MODEL).items()
               if n == SCALING_N}
    latest = max(used, key=row_date)
    summary = session_summary(used)
    return {"source": [summary["source"]],
            "machine": {"gpu": summary["gpu"],
                        "git_commit": latest.get("provenance", {}).get("git_commit"),
                        "date": summary["date"],
                        "host": latest.get("provenance", {}).get("host")},
            "sms_per_device": summary["sms_per_device"],
            "grids": grids,
            "scaling": scaling_series(sorted(scaling), scaling) if 1 in scaling else None,
            "not_used": [session_summary(s) for s in others]}


def measure(ppbench: str) -> dict:
    """Everything timed on this machine: layer profiles of every model and the real runs."""
    data: dict = {"profiles": {}, "runs": {}, "scaling_runs": []}
    done: dict[str, dict] = {}  # Transformer-48 and -24 share their one profiled layer
    for name, (flags, short) in FULL.items():
        profiled = flags
        for i in range(0, len(short), 2):
            profiled = with_flag(profiled, short[i], short[i + 1])
        key = " ".join(profiled)
        if key not in done:
            print(f"profiling {name} ...", file=sys.stderr)
            done[key] = profile_layers(ppbench, profiled, 2, FULL_PROFILE_REPEATS)
        data["profiles"][name] = done[key]
    for name, flags in SMALL.items():
        print(f"profiling {name} ...", file=sys.stderr)
        data["profiles"][name] = profile_layers(ppbench, flags, 4, SMALL_PROFILE_REPEATS)
        print(f"running {name} ...", file=sys.stderr)
        data["runs"][name] = measure_points(ppbench, flags, "gpipe", [(2, m) for m in MS])
    print(f"running 1F1B on {SCALING_MODEL} ...", file=sys.stderr)
    data["scaling_runs"] = measure_points(ppbench, SMALL[SCALING_MODEL], "1f1b",
                                          [(d, SCALING_N) for d in SCALING_MEASURED_D])
    return data


# Each table's base cell is its own: Table 3 has only M = 32.
DEFINITION = ("throughput in samples per second at micro-batch size 1, divided by the same "
              "model's K = 2 cell at the table's first M (Table 2: K = 2, M = 1; Table 3: "
              "K = 2, M = 32), as the paper normalises")


def build(ppbench: str, data: dict, gpu: list[dict] | None = None) -> dict:
    """Tables and series from the measured data (simulation is deterministic) and the GPU rows
    of scripts/gpu_tables.py, if any."""
    table2, table3, small = [], [], []
    gpu_table = gpu_section(gpu or [])
    grid_of = {g["model"]: g for g in (gpu_table or {}).get("grids", [])}
    for name in TABLE2:
        flags = FULL[name][0]
        spec, layers = full_layers(ppbench, flags, data["profiles"][name])
        sims = [predict(ppbench, flags, layers, spec, "gpipe", k, m) for k in KS for m in MS]
        pred = {(s["K"], s["M"]): s["samples_per_s"] for s in sims}
        sname = SMALL_OF[name]
        sflags = SMALL[sname]
        sspec, slayers = full_layers(ppbench, sflags, data["profiles"][sname])
        ssims = [predict(ppbench, sflags, slayers, sspec, "gpipe", 2, m) for m in MS]
        meas = {(r["K"], r["M"]): r["samples_per_s"] for r in data["runs"][sname]}
        spred = normalise({(s["K"], s["M"]): s["samples_per_s"] for s in ssims}, (2, 1))
        snorm = normalise(meas, (2, 1))
        grid = {r["M"]: r["cells"]["2"] for r in grid_of[sname]["rows"]} if sname in grid_of \
            else {}
        table2.append({"model": name, "flags": " ".join(flags), "simulations": sims,
                       "rows": table2_rows(name, pred)})
        small.append({"model": sname, "of": name, "flags": " ".join(sflags),
                      "simulations": ssims, "runs": data["runs"][sname],
                      "rows": [{"M": m, "predicted": spred[(2, m)], "measured": snorm[(2, m)],
                                "cuda": grid.get(m)} for m in MS]})
    for name in TABLE3:
        flags = FULL[name][0]
        spec, layers = full_layers(ppbench, flags, data["profiles"][name])
        sims = [predict(ppbench, flags, layers, spec, "gpipe", k, 32) for k in KS]
        row = table3_row(name, {s["K"]: s["samples_per_s"] for s in sims})
        table3.append({**row, "flags": " ".join(flags), "simulations": sims})
    sflags = SMALL[SCALING_MODEL]
    sspec, slayers = full_layers(ppbench, sflags, data["profiles"][SCALING_MODEL])
    spred = {d: predict(ppbench, sflags, slayers, sspec, "1f1b", d, SCALING_N)["samples_per_s"]
             for d in SCALING_PREDICTED_D}
    smeas = {r["K"]: r["samples_per_s"] for r in data["scaling_runs"]}
    runs = [r for rs in data["runs"].values() for r in rs] + data["scaling_runs"]
    return {
        "discussion": discussion(table2, small, gpu_table),
        "source": PAPER,
        "definition": DEFINITION,
        "data": data,
        "machine": runs[0]["provenance"] if runs else {},
        "predicted_by": simulator_provenance(ppbench),
        "table2": table2, "table3": table3, "small": small, "gpu": gpu_table,
        "scaling": {"model": SCALING_MODEL, "flags": " ".join(sflags), "schedule": "1f1b",
                    "microbatches": SCALING_N, "microbatch_size": 1,
                    "measured": scaling_series(SCALING_MEASURED_D, smeas),
                    "predicted": scaling_series(SCALING_PREDICTED_D, spred)},
    }


def simulator_provenance(ppbench: str) -> dict:
    """The build whose simulator made the predictions (git commit, version, date): --reuse remakes
    them with today's ppbench from measurements of another day, so "machine" alone would date
    the simulation wrongly."""
    prov = ppbench_json(ppbench, ["simulate", "-s", "gpipe", "-d", "1", "-n", "1",
                                  "--format", "json"]).get("provenance") or {}
    return {k: prov.get(k) for k in ("git_commit", "ppbench_version", "date")}


def discussion(table2: list[dict], small: list[dict], gpu: dict | None = None) -> str:
    """Whether the paper's trends hold in the prediction, the CPU runs and the GPU runs, in
    words."""
    yes = {True: "yes", False: "no"}
    parts = []
    for t in table2:
        p, q = trends(t["rows"], "paper"), trends(t["rows"], "predicted")
        parts.append(
            f"{t['model']}: throughput rises with K at M = 32 in the paper "
            f"{yes[p['rises_with_K_at_M32']]}, predicted {yes[q['rises_with_K_at_M32']]}; "
            "with M at K = 8 paper "
            f"{yes[p['rises_with_M_at_K8']]}, predicted {yes[q['rises_with_M_at_K8']]}; K = 8 over "
            f"K = 2 at M = 32: paper {p['K8_over_K2_at_M32']:.2f}x, predicted "
            f"{q['K8_over_K2_at_M32']:.2f}x.")
    for s in small:
        m = [r["measured"] for r in s["rows"]]
        parts.append(f"{s['model']} at K = 2 on the CPU: M = 1, 4, 32 give "
                     + ", ".join(f"{x:.2f}" for x in m) + " measured against "
                     + ", ".join(f"{r['predicted']:.2f}" for r in s["rows"]) + " predicted.")
    for grid in (gpu or {}).get("grids", []):
        rows = [{"M": r["M"], "cells": {k: {"gpu": v} for k, v in r["cells"].items()}}
                for r in grid["rows"]]
        if any(c["gpu"] is None for r in rows for c in r["cells"].values()):
            continue
        q = trends(rows, "gpu")
        parts.append(
            f"{grid['model']} on one GPU, K devices of {gpu['sms_per_device']} SMs: throughput "
            f"rises with K at M = 32 {yes[q['rises_with_K_at_M32']]}, with M at K = 8 "
            f"{yes[q['rises_with_M_at_K8']]}; K = 8 over K = 2 at M = 32: "
            f"{q['K8_over_K2_at_M32']:.2f}x.")
    parts.append("With M = 1 a GPipe step runs the stages one after another whatever K, so the "
                 "prediction is the same for every K; the paper's M = 1 row still rises with K, "
                 "which the schedule alone does not explain (the paper adjusted the batch size to "
                 "fit memory where necessary).")
    parts.append(TPU_VS_CPU)
    return " ".join(parts)


def plot(table: dict, out: Path) -> None:
    """The scaling figure: the CPU panel, and beside it the GPU's where gpu_tables.py rows exist
    (its throughput is on another scale)."""
    plt = pyplot("gpipe_tables' scaling figure")
    s = table["scaling"]
    meas, pred = s["measured"], s["predicted"]
    gpu = (table.get("gpu") or {}).get("scaling")
    fig, axes = plt.subplots(1, 2 if gpu else 1, figsize=(11 if gpu else 6, 4), squeeze=False)
    ax = axes[0][0]
    ax.plot(pred["devices"], pred["ideal"], "k--", label="ideal (linear from D = 1, predicted)")
    ax.plot(pred["devices"], pred["throughput"], "o-", label="ppbench simulate (measured costs)")
    ax.plot(meas["devices"], meas["throughput"], "s-", label="measured on the CPU")
    ax.plot(meas["devices"], meas["ideal"], "k:", label="ideal (linear from D = 1, measured)")
    ax.set_title(f"1F1B, {s['model']}, N = {s['microbatches']} micro-batches of 1", fontsize=9)
    if gpu:
        g = axes[0][1]
        g.plot(gpu["devices"], gpu["ideal"], "k:", label="ideal (linear from D = 1)")
        g.plot(gpu["devices"], gpu["throughput"], "^-", color="C2",
               label=f"measured, {table['gpu']['sms_per_device']} SMs per device")
        g.set_title(f"the same on one {table['gpu']['machine']['gpu']} split into D devices",
                    fontsize=9)
    for a in axes[0]:
        a.set_xlabel("pipeline devices D")
        a.set_ylabel("samples / s")
        a.set_xticks(pred["devices"])
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, out, dpi=120)


def reused_data(path: Path) -> dict:
    """The measurements of an earlier output (its "data"), checked for what build() reads first
    (the rest of its walk is inside shaped())."""
    data = read_json(path, "--reuse", expect=dict).get("data")
    if not isinstance(data, dict):
        raise InputError(f"--reuse {path}: its \"data\" is {json_kind(type(data))}, not the "
                         "object of measurements gpipe_tables.py writes")
    for key, kind in (("profiles", dict), ("runs", dict), ("scaling_runs", list)):
        if not isinstance(data.get(key), kind):
            raise InputError(f"--reuse {path}: data.{key} is {json_kind(type(data.get(key)))}, "
                             f"not a JSON {json_kind(kind)}")
    return data


def kept_path(out: Path) -> Path:
    """Where the measurements wait for OUT: OUT's sibling OUT.data.json (the --reuse input)."""
    return out.with_name(out.stem + ".data.json")


@contextlib.contextmanager
def records_fit() -> Iterator[None]:
    """ppbench's records that do not fit together (a layer without a profile, a record without
    its field) are the program's failure, not the caller's input: one line and exit 1."""
    try:
        yield
    except (KeyError, ValueError, TypeError) as e:
        raise ScriptError(f"ppbench's records do not fit together: {type(e).__name__}: {e}",
                          1) from None


def measure_and_build(ppbench: str, out: Path, gpu: list[dict]) -> dict:
    """The table from new measurements. They are kept beside OUT (kept_path) before the
    simulation, so that a failure there can be redone with --reuse without timing again; OUT
    itself is left as it was."""
    with records_fit():
        data = measure(ppbench)
    kept = kept_path(out)
    atomic_write(kept, json.dumps({"data": data}, indent=1) + "\n")
    try:
        with records_fit():
            return build(ppbench, data, gpu)
    except ScriptError as e:
        raise ScriptError(f"{e} (the measurements are kept in {kept}: redo with --reuse "
                          f"{kept})", e.code) from None


def main(argv: list[str] | None = None) -> int:
    """Exit 0 with the table and the figure written; a bad option, --reuse file or GPU row
    raises InputError (exit 2 through run) and ppbench's failure PpbenchError (its own status),
    both outputs checked before any timing."""
    parser = OneLineParser(prog="gpipe_tables", description=__doc__.splitlines()[0],
                           epilog=__doc__.split("\n\n", 1)[1],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ppbench", default="build/ppbench", help="(default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("results/reference/gpipe_tables.json"),
                        help="(default: %(default)s)")
    parser.add_argument("--plot", type=Path,
                        default=Path("plots/reference/gpipe_1f1b_scaling.png"),
                        help="(default: %(default)s)")
    parser.add_argument("--gpu-rows", default=GPU_ROWS,
                        help="glob of scripts/gpu_tables.py's JSON Lines files (default: "
                             "%(default)s)")
    parser.add_argument("--reuse", type=Path,
                        help="take the measurements from this earlier output instead of timing")
    args = parser.parse_args(argv)
    data = reused_data(args.reuse) if args.reuse else None
    gpu = gpu_rows(args.gpu_rows)
    output_path(args.out, "--out")
    args.plot = output_path(figure_path(args.plot, "--plot"), "--plot")
    if data is not None:
        with shaped(f"--reuse {args.reuse}"):
            table = build(args.ppbench, data, gpu)
    else:
        table = measure_and_build(args.ppbench, args.out, gpu)
    atomic_write(args.out, json.dumps(table, indent=1) + "\n")
    # OUT holds the measurements now (its "data"): the copy kept for a failure goes.
    kept_path(args.out).unlink(missing_ok=True)
    plot(table, args.plot)
    print(f"wrote {args.out} and {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run("gpipe_tables", main))
