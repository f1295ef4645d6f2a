#!/usr/bin/env python3
"""Figures of measured runs (`ppbench run` rows of scripts/sweep.py's JSON Lines).

1. OUT_DIR/memory_<workload>_D<D>_N<N>.png: per-rank peak activation memory of a few schedules
   at one (D, N), measured (the per-rank activation arena's peak bytes) beside modelled (the
   workload's activation model replayed over the schedule), as grouped bars per rank; one panel
   per schedule, a shared y axis in MiB.
2. OUT_DIR/bubble_measured_vs_predicted.png: measured bubble_fraction against the simulator's
   prediction from the same step's measured per-op costs, over every ok run row, one colour per
   workload and placement (threads; processes under mpirun; a GPU backend), with the y = x line
   (points above it: the real run idled more than the replay).

bubble_fraction = Σ idle / (ranks × makespan), idle_r = makespan − busy_r. Rows are read, not
recomputed: every number comes from the results file. Without --schedules the memory figure has
every schedule of the data at (workload, D, N), in the order of `ppbench list --format json`
with --ppbench, else as the data first names them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from report_format import check_records, field, placement_title
from results_io import atomic_savefig, load_records, pyplot, schedule_order, schedule_registry
from script_cli import InputError, OneLineParser, number, output_path, run, shaped

MEASURED_COLOUR = "#0072B2"
MODEL_COLOUR = "#E69F00"
WORKLOAD_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]
WORKLOAD_MARKERS = ["o", "s", "^", "D", "v", "P"]
MIB = 1024.0 * 1024.0
# Past 1200 dpi a figure of several panels runs into tens of gigabytes of pixels.
DPI_RANGE = (10, 1200)


def ok_run_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows
            if r.get("status", "ok") == "ok" and isinstance(r.get("measured"), dict)]


def machine(rows: list[dict]) -> str:
    """The machines the rows were measured on, as 'CPU (cores), host' (several joined by ';')."""
    seen = []
    for r in rows:
        prov = r.get("provenance") or {}
        text = str(prov.get("cpu") or "unknown CPU")
        if prov.get("cpu_cores"):
            text += f" ({prov['cpu_cores']} cores)"
        if prov.get("host"):
            text += f", host {prov['host']}"
        if text not in seen:
            seen.append(text)
    return "; ".join(seen) if seen else "unknown machine"


# What else makes a run's memory differ at the same (workload, D, N): the panels of one figure
# share all of them (the schedule's own chunks and group size aside).
CONFIG_KEYS = ("workload_flags", "microbatch_size", "dtype", "recompute", "backend",
               "virtual_devices", "gpus", "launcher", "replicas")


def config_of(row: dict) -> tuple:
    return tuple(json.dumps(field(row, k), sort_keys=True) for k in CONFIG_KEYS)


def memory_rows(rows: list[dict], workload: str, devices: int, microbatches: int,
                schedules: list[str]) -> list[dict]:
    """The ok run row of each schedule at (workload, D, N), in the order asked (a later row of a
    schedule replaces an earlier one), all of one configuration (CONFIG_KEYS): the one that
    holds the most of the schedules, of those the one whose row came last."""
    found: dict[tuple, dict[str, dict]] = {}
    last: dict[tuple, int] = {}
    for n, r in enumerate(ok_run_rows(rows)):
        if (field(r, "workload") == workload and int(field(r, "devices", 0)) == devices
                and int(field(r, "microbatches", 0)) == microbatches
                and field(r, "schedule") in schedules and r.get("activation_bytes")):
            config = config_of(r)
            found.setdefault(config, {})[field(r, "schedule")] = r
            last[config] = n
    if not found:
        return []
    best = max(found, key=lambda c: (len(found[c]), last[c]))
    return [found[best][s] for s in schedules if s in found[best]]


def per_rank_bytes(row: dict) -> tuple[list[int], list[float], list[float]]:
    entries = sorted((a for a in row.get("activation_bytes") or [] if isinstance(a, dict)),
                     key=lambda a: int(a.get("rank", 0)))
    return ([int(a.get("rank", 0)) for a in entries],
            [float(a.get("measured_peak_bytes") or 0) for a in entries],
            [float(a.get("model_peak_bytes") or 0) for a in entries])


def plot_memory(rows: list[dict], out: Path, workload: str, devices: int, microbatches: int,
                schedules: list[str], dpi: int = 110) -> list[str]:
    """Write the grouped-bar figure; returns the schedules drawn (ValueError if none)."""
    chosen = memory_rows(rows, workload, devices, microbatches, schedules)
    if not chosen:
        raise ValueError(f"no ok run rows with activation_bytes for {workload} at D={devices}, "
                         f"N={microbatches} and schedules {', '.join(schedules)}")
    cols = min(3, len(chosen))
    nrows = (len(chosen) + cols - 1) // cols
    plt = pyplot("plot_memory")
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.0 * nrows + 0.9), dpi=dpi,
                             sharey=True, squeeze=False)
    width = 0.38
    for ax, row in zip(axes.flat, chosen):
        ranks, measured, model = per_rank_bytes(row)
        xs = list(range(len(ranks)))
        ax.bar([x - width / 2 for x in xs], [m / MIB for m in measured], width,
               color=MEASURED_COLOUR, label="measured (arena peak)")
        ax.bar([x + width / 2 for x in xs], [m / MIB for m in model], width,
               color=MODEL_COLOUR, label="modelled (activation model)")
        ax.set_xticks(xs, [f"rank {r}" for r in ranks])
        ax.set_title(f"{field(row, 'schedule')}  (peak {max(measured) / MIB:.3g} MiB measured)",
                     fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    for ax in axes.flat[len(chosen):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("peak activation memory (MiB)")
    flags = field(chosen[0], "workload_flags") or ""
    fig.suptitle(f"Per-rank peak activation memory, {workload} ({flags}), "
                 f"b={field(chosen[0], 'microbatch_size', '?')}, D={devices}, N={microbatches}\n"
                 f"measured on {machine(chosen)}", fontsize=10)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, out, dpi=dpi)
    plt.close(fig)
    return [field(r, "schedule") for r in chosen]


def series_of(row: dict) -> str:
    """A scatter series: the workload, and where the ranks ran if not threads on the CPU."""
    placement = placement_title(row)
    workload = str(field(row, "workload", "?"))
    return f"{workload}, {placement}" if placement else workload


def bubble_points(rows: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """series (series_of) -> [(predicted, measured)] of every ok run row that has both."""
    points: dict[str, list[tuple[float, float]]] = {}
    for r in ok_run_rows(rows):
        measured = (r.get("measured") or {}).get("bubble_fraction")
        predicted = (r.get("predicted") or {}).get("bubble_fraction")
        if isinstance(measured, (int, float)) and isinstance(predicted, (int, float)):
            points.setdefault(series_of(r), []).append(
                (float(predicted), float(measured)))
    return points


def plot_bubble_fidelity(rows: list[dict], out: Path, dpi: int = 110) -> int:
    """Write the measured-vs-predicted scatter; returns the number of points (ValueError if 0)."""
    points = bubble_points(rows)
    total = sum(len(v) for v in points.values())
    if not total:
        raise ValueError("no ok run rows with measured and predicted bubble_fraction")
    plt = pyplot("plot_memory")
    fig, ax = plt.subplots(figsize=(6.4, 6.0), dpi=dpi)
    top = max(max(p, m) for v in points.values() for p, m in v)
    top = min(1.0, max(0.05, top * 1.05))
    ax.plot([0, top], [0, top], color="#444444", lw=1, ls="--", label="y = x", zorder=1)
    for i, (series, pts) in enumerate(sorted(points.items())):
        gaps = [100 * (m - p) for p, m in pts]
        ax.scatter([p for p, _ in pts], [m for _, m in pts], s=18, alpha=0.75,
                   color=WORKLOAD_COLOURS[i % len(WORKLOAD_COLOURS)],
                   marker=WORKLOAD_MARKERS[i % len(WORKLOAD_MARKERS)], zorder=2,
                   label=f"{series} ({len(pts)} runs, gap {min(gaps):+.1f} … "
                         f"{max(gaps):+.1f} pp)")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_aspect("equal")
    ax.set_xlabel("predicted bubble_fraction (simulator replaying measured op costs)")
    ax.set_ylabel("measured bubble_fraction")
    ax.set_title(f"Measured vs predicted bubble, {total} runs\n"
                 f"measured on {machine(ok_run_rows(rows))}",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, out, dpi=dpi)
    plt.close(fig)
    return total


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="plot_memory",
        description="Per-rank activation memory (measured beside modelled) and measured-vs-"
                    "predicted bubble figures from `ppbench run` sweep rows.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, nargs="+",
                        help="JSON Lines from scripts/sweep.py (run rows); several are read in "
                             "the order given (a later row of a point replaces an earlier one)")
    parser.add_argument("--out-dir", type=Path, default=Path("plots/latest"),
                        help="output folder (default: %(default)s)")
    parser.add_argument("--workload", default="transformer",
                        help="workload of the memory figure (default: %(default)s)")
    parser.add_argument("--devices", type=number(int, 1), default=4,
                        help="D of the memory figure (default: 4)")
    parser.add_argument("--microbatches", type=number(int, 1), default=8,
                        help="N of the memory figure (default: 8)")
    parser.add_argument("--schedules",
                        help="schedules of the memory figure, comma-separated (default: every "
                             "schedule in the data, in the registry's order with --ppbench)")
    parser.add_argument("--ppbench", help="ppbench binary: schedule order from `ppbench list "
                                          "--format json` (default: the order in the data)")
    parser.add_argument("--dpi", type=number(int, *DPI_RANGE), default=110,
                        help="resolution, %d to %d (default: %%(default)s)" % DPI_RANGE)
    args = parser.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit 0 with both figures written, 1 with one of them (the other's reason on stderr); a bad
    option, file or record, or records with neither figure to draw, raise InputError (exit 2
    through run)."""
    args = parse_args(argv)
    where = f"records {', '.join(str(p) for p in args.results)}"
    rows = check_records(load_records(*args.results), where)
    if args.schedules:
        schedules = [s for s in args.schedules.split(",") if s]
    else:
        registry = schedule_registry(args.ppbench)
        present = {field(r, "schedule") for r in ok_run_rows(rows)}
        schedules = [s for s in schedule_order(registry, ok_run_rows(rows)) if s in present]
    memory_out = args.out_dir / f"memory_{args.workload}_D{args.devices}_N{args.microbatches}.png"
    bubble_out = args.out_dir / "bubble_measured_vs_predicted.png"
    with shaped(where):
        # What each figure lacks, before a folder is made: with neither to draw, nothing is.
        lacks = {"memory": None if memory_rows(rows, args.workload, args.devices,
                                               args.microbatches, schedules) else
                 f"no ok run rows with activation_bytes for {args.workload} at "
                 f"D={args.devices}, N={args.microbatches} and schedules "
                 f"{', '.join(schedules) or '(none in the data)'}",
                 "bubble": None if bubble_points(rows) else
                 "no ok run rows with measured and predicted bubble_fraction"}
        if all(lacks.values()):
            raise InputError(f"nothing to draw from {where}: {lacks['memory']}; "
                             f"{lacks['bubble']}")
        pyplot("plot_memory")  # before any folder is made
        output_path(args.out_dir, "--out-dir", folder=True)
        if lacks["memory"]:
            print(f"plot_memory: {lacks['memory']}", file=sys.stderr)
        else:
            drawn = plot_memory(rows, memory_out, args.workload, args.devices,
                                args.microbatches, schedules, args.dpi)
            missing = [s for s in schedules if s not in drawn]
            print(f"wrote {memory_out}"
                  + (f" (no ok rows for {', '.join(missing)})" if missing else ""))
        if lacks["bubble"]:
            print(f"plot_memory: {lacks['bubble']}", file=sys.stderr)
        else:
            n = plot_bubble_fidelity(rows, bubble_out, args.dpi)
            print(f"wrote {bubble_out} ({n} runs)")
    return 1 if any(lacks.values()) else 0


if __name__ == "__main__":
    sys.exit(run("plot_memory", main))
