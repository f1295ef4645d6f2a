#!/usr/bin/env python3
"""Plot bubble fraction against the number of micro-batches from sweep results.

Reads the JSON Lines written by scripts/sweep.py and draws, for each cost setting (the sweep's
"cost" and "comm"), one figure with a subplot per device count D: every schedule's simulated
bubble_fraction as markers and its closed form (closed_form.bubble_fraction, where not null)
as a line of the same colour. x is N on a log2 axis.

bubble_fraction = sum of idle / (ranks x makespan), idle_r = makespan - busy_r.
A series is a schedule with its chunks and the group size its points asked for, labelled as the
report's tables label it (report_format.series_label); series are ordered as `ppbench list
--format json` lists the schedules with --ppbench, else as the data first names them.
Output: OUT_DIR/bubble_<cost>.png, e.g. plots/latest/bubble_F1_B2.png.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

from report_format import check_records, comm_of, cost_of, field, series_label
from results_io import atomic_savefig, load_records, order_key, pyplot, schedule_order, \
    schedule_registry
from script_cli import InputError, OneLineParser, number, number_list, output_path, run, shaped

# Okabe-Ito colours plus black, cycled with markers so 12+ series stay distinguishable.
COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#F0E442"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]
# Past 1200 dpi a figure of several panels runs into tens of gigabytes of pixels.
DPI_RANGE = (10, 1200)
DEFINITION = "bubble_fraction = Σ idle / (ranks × makespan)"


def group_rows(rows: list[dict]) -> dict[tuple[str, float], dict[int, dict[str, list[dict]]]]:
    """(cost, comm) -> D -> series label -> ok rows sorted by N."""
    groups: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for row in rows:
        if row.get("status", "ok") != "ok" or row.get("bubble_fraction") is None:
            continue
        groups[(cost_of(row), comm_of(row))][int(field(row, "devices"))][series_label(row)] \
            .append(row)
    for by_d in groups.values():
        for by_series in by_d.values():
            for series in by_series.values():
                series.sort(key=lambda r: field(r, "microbatches"))
    return groups


def cost_title(cost: str, comm: float) -> str:
    text = ", ".join(cost.split(",")) if cost else "default costs"
    return text + (f", comm={comm:g}" if comm else "")


def file_slug(cost: str, comm: float) -> str:
    """The name part of a cost setting's figure: F=1,B=2 -> F1_B2; comm 0.5 adds _comm0.5."""
    slug = re.sub(r"[^A-Za-z0-9.]+", "_", cost.replace("=", "")).strip("_") or "default"
    return slug + (f"_comm{comm:g}" if comm else "")


def figure_costs(name: str) -> tuple[str, float]:
    """A figure's name back to its cost setting (file_slug's inverse, for the report's
    captions): bubble_F1_I1_W1.png -> ("F=1,I=1,W=1", 0.0), bubble_default_comm0.5.png ->
    ("", 0.5)."""
    slug = Path(name).stem.removeprefix("bubble_")
    comm = 0.0
    split = re.fullmatch(r"(.+)_comm(\d+(?:\.\d*)?(?:e[+-]?\d+)?)", slug)
    if split:
        slug, comm = split.group(1), float(split.group(2))
    if slug == "default":
        return "", comm
    return ",".join(re.sub(r"^([A-Za-z]+)", r"\1=", part) for part in slug.split("_")), comm


def plot_group(by_d: dict[int, dict[str, list[dict]]], title: str, out: Path,
               dpi: int = 110, sort_key=None) -> None:
    plt = pyplot("plot_bubble")
    from matplotlib.ticker import FixedLocator, NullLocator
    devices = sorted(by_d)
    labels = sorted({label for d in devices for label in by_d[d]}, key=sort_key)
    # Past the palette, colours repeat with a dashed closed-form line and another marker.
    style = {label: (COLOURS[i % len(COLOURS)], MARKERS[i % len(MARKERS)],
                     "-" if i < len(COLOURS) else "--")
             for i, label in enumerate(labels)}
    top = 0.0
    fig, axes = plt.subplots(1, len(devices), figsize=(4.6 * len(devices), 4.4), dpi=dpi,
                             sharey=True, squeeze=False)
    for ax, d in zip(axes[0], devices):
        all_n: set[int] = set()
        for label in labels:
            series = by_d[d].get(label)
            if not series:
                continue
            colour, marker, linestyle = style[label]
            ns = [field(r, "microbatches") for r in series]
            all_n.update(ns)
            ax.plot(ns, [r["bubble_fraction"] for r in series], linestyle="none", marker=marker,
                    color=colour, markersize=5, markerfacecolor="none", markeredgewidth=1.3)
            closed = [(field(r, "microbatches"),
                       (r.get("closed_form") or {}).get("bubble_fraction"))
                      for r in series]
            closed = [(n, b) for n, b in closed if b is not None]
            if closed:
                ax.plot(*zip(*closed), color=colour, linewidth=1.0, alpha=0.8,
                        linestyle=linestyle)
            top = max([top] + [r["bubble_fraction"] for r in series] + [b for _, b in closed])
        ax.set_xscale("log", base=2)
        if all_n:
            ax.xaxis.set_major_locator(FixedLocator(sorted(all_n)))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticklabels([str(n) for n in sorted(all_n)], fontsize=7)
        ax.set_title(f"D = {d}")
        ax.set_xlabel("micro-batches N")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylim(0, min(1.0, top * 1.08) if top > 0 else 1.0)
    axes[0][0].set_ylabel("bubble fraction")
    handles = [plt.Line2D([], [], color=style[name][0], marker=style[name][1],
                          markerfacecolor="none", linestyle=style[name][2], label=name)
               for name in labels]
    handles.append(plt.Line2D([], [], color="gray", marker="o", markerfacecolor="none",
                              linestyle="none", label="markers: simulated"))
    handles.append(plt.Line2D([], [], color="gray", linestyle="-", label="lines: closed form"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 7), frameon=False,
               fontsize=8)
    fig.suptitle(title)
    rows_of_legend = (len(handles) + 6) // 7
    fig.tight_layout(rect=(0, 0.06 * rows_of_legend, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, out, dpi=dpi)
    plt.close(fig)


def plot_bubble(rows: list[dict], out_dir: Path, dpi: int = 110,
                registry: list[dict] | None = None) -> list[Path]:
    """One figure per cost setting; series in the registry's order (else the data's)."""
    written = []
    sort_key = order_key(schedule_order(registry, rows))
    for (cost, comm), by_d in sorted(group_rows(rows).items()):
        out = out_dir / f"bubble_{file_slug(cost, comm)}.png"
        plot_group(by_d, f"{DEFINITION}, {cost_title(cost, comm)}", out, dpi, sort_key)
        written.append(out)
    return written


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="plot_bubble",
        description="Plot bubble fraction vs micro-batches (simulated and closed form) per "
                    "schedule, one subplot per D, one figure per cost setting.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path,
                        help="JSON Lines from scripts/sweep.py")
    parser.add_argument("--out-dir", type=Path, default=Path("plots/latest"),
                        help="where to write bubble_*.png (default: %(default)s)")
    parser.add_argument("--sweep", help="only rows of this sweep name")
    parser.add_argument("--devices", type=number_list(int, 1),
                        help="only these D, comma-separated (default: all)")
    parser.add_argument("--dpi", type=number(int, *DPI_RANGE), default=110,
                        help="resolution, %d to %d (default: %%(default)s)" % DPI_RANGE)
    parser.add_argument("--ppbench", help="ppbench binary: series in the order of `ppbench list "
                                          "--format json` (default: the order in the data)")
    args = parser.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit 0 with the figures written; a bad option, file or record, or records without an ok
    row to draw, raise InputError (exit 2 through run)."""
    args = parse_args(argv)
    rows = check_records(load_records(args.results), f"records {args.results}")
    if args.sweep:
        rows = [r for r in rows if r.get("sweep") == args.sweep]
    if args.devices:
        rows = [r for r in rows if field(r, "devices") in set(args.devices)]
    with shaped(f"records {args.results}"):
        drawable = bool(group_rows(rows))
    if not drawable:
        raise InputError(f"no ok rows with a bubble_fraction in {args.results}"
                         + (" (of the rows --sweep and --devices keep)"
                            if args.sweep or args.devices else ""))
    pyplot("plot_bubble")  # before any folder is made
    registry = schedule_registry(args.ppbench)  # and ppbench asked: no folder if it fails
    output_path(args.out_dir, "--out-dir", folder=True)
    with shaped(f"records {args.results}"):
        written = plot_bubble(rows, args.out_dir, args.dpi, registry)
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run("plot_bubble", main))
