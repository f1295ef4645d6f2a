#!/usr/bin/env python3
"""Draw a per-rank pipeline timeline from a ppbench Chrome/Perfetto trace.

One row per rank (rank 0 at the top); each compute action is a box coloured by its op
(F, B, I, W and overlapped F&B pairs) and labelled with its micro-batch, or stage.micro-batch
when ranks hold several stages; later micro-batches get a lighter shade. The gray band behind
each row is idle time. Communication events (pid 1), when their tid is a rank, are drawn as a
thin strip under that rank's row. A training step's other work on a rank is drawn too: its
optimizer updates (pid 3, `run --optimizer`) as boxes in its row, and its data-parallel
all-reduces (pid 2, `run --dp`), which may run beside its compute, as a strip along the top of
its row. Across processes (`mpirun ... --dp R`) the rows are the job's processes, named by
replica and pipeline rank.

Trace format (written by `ppbench simulate --trace-out FILE` and `ppbench run --trace-out
FILE`): {"traceEvents": [...], "otherData": {...}}; compute events have "ph": "X", "pid": 0,
"tid": rank, "ts"/"dur" in microseconds, "cat" in F/B/I/W/FB and "args": {"stage", "mb"}.
otherData.time_unit says what the microseconds stand for: in a simulated trace 1 cost unit =
1000 us, so the axis is in cost units; a measured trace (time_unit "s", from `ppbench run`) is
real time, drawn in milliseconds, and its title names the machine (otherData.cpu, cpu_cores).
"""

from __future__ import annotations

import argparse
import colorsys
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from results_io import atomic_savefig, figure_path, pyplot
from script_cli import InputError, OneLineParser, json_kind, number, output_path, read_json, run, \
    shaped

US_PER_UNIT = 1000.0  # simulator time unit 1 = 1000 us; for measured traces 1000 us = 1 ms
MEASURED_TIME_UNITS = frozenset({"s", "ms", "us"})  # real time, as `ppbench run` writes it

# Okabe-Ito palette (colour-blind safe).
OP_COLOURS = {
    "F": "#0072B2",   # blue
    "B": "#D55E00",   # vermillion
    "I": "#E69F00",   # orange
    "W": "#009E73",   # bluish green
    "FB": "#CC79A7",  # reddish purple
}
OP_NAMES = {"F": "F forward", "B": "B backward", "I": "I input grad", "W": "W weight grad",
            "FB": "F&B overlapped"}
COMM_COLOUR = "#444444"
IDLE_COLOUR = "#D9D9D9"
UPDATE_COLOUR = "#F0E442"     # yellow: the optimizer's update of a stage
ALLREDUCE_COLOUR = "#56B4E9"  # sky blue: a data-parallel all-reduce

ACTION_RE = re.compile(r"([FBIW])(\d+)\.(\d+)")

# One row per rank: past this many a timeline is no longer a figure anyone can read, and a stray
# tid (say 10^9) would otherwise make a figure of that many rows.
MAX_RANKS = 1024
DPI_RANGE = (10, 1200)
WIDTH_RANGE = (2.0, 200.0)  # inches
# matplotlib's own limit on a side, and a bound on the pixels in all (about 0.5 GB of RGBA).
MAX_SIDE_PIXELS, MAX_PIXELS = 65535, 2**27


@dataclass
class Box:
    rank: int
    op: str
    start: float  # cost units
    dur: float
    label: str
    shade: float  # 0 = full colour, up to ~0.5 = lighter


def load_trace(path: Path) -> dict:
    """The trace in `path`, once its events and otherData are objects (InputError naming the
    file where it cannot be read or is of another shape)."""
    data = read_json(path, "trace", expect=None)
    if isinstance(data, list):  # the bare-array Chrome trace form
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise InputError(f"trace {path}: not a Chrome trace (no traceEvents list)")
    for i, e in enumerate(data["traceEvents"]):
        if not isinstance(e, dict):
            raise InputError(f"trace {path}: traceEvents[{i}] is {json_kind(type(e))}, not an "
                             "object")
        if e.get("args") is not None and not isinstance(e["args"], dict):
            raise InputError(f"trace {path}: traceEvents[{i}].args is "
                             f"{json_kind(type(e['args']))}, not an object")
    if data.get("otherData") is not None and not isinstance(data["otherData"], dict):
        raise InputError(f"trace {path}: otherData is {json_kind(type(data['otherData']))}, "
                         "not an object")
    for i, e in enumerate(data["traceEvents"]):
        if e.get("ph") == "X":  # a span: every one drawn is placed by its ts and dur
            check_time(path, i, e, "ts", required=True)
            check_time(path, i, e, "dur", required=False)
    return data


def check_time(path: Path, i: int, event: dict, key: str, required: bool) -> None:
    """A span's ts (a finite number) or dur (a finite number >= 0, 0 where absent); else
    InputError naming the file, the event and the field. A NaN, an infinity (or 1e999, which
    the JSON reader makes one) or a negative duration places no box."""
    if key not in event and not required:
        return
    value = event.get(key)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or (key == "dur" and value < 0):
        allowed = "a finite number >= 0" if key == "dur" else "a finite number"
        shown = "missing" if key not in event else repr(value)
        raise InputError(f"trace {path}: traceEvents[{i}].{key} "
                         f"({event.get('name', '?')}) is {shown}; allowed: {allowed}")


def check_text(text: str | None, option: str) -> None:
    """A --title or --label matplotlib can draw: text between two unescaped $ is mathtext, and
    one it cannot parse would fail the drawing (InputError naming the option)."""
    if not text:
        return
    from matplotlib import cbook
    from matplotlib.mathtext import MathTextParser
    if not cbook.is_math_text(text):
        return
    try:
        MathTextParser("path").parse(text, dpi=72)
    except ValueError as e:
        # pyparsing's message lists every token it expected; where it stopped is enough.
        found = re.search(r"found [^(]*", str(e))
        where = found.group(0).strip().rstrip(",") if found else " ".join(str(e).split())[:120]
        raise InputError(f"{option} {text!r}: matplotlib cannot draw it (mathtext: {where}); "
                         r"allowed: plain text, $...$ mathtext, or \$ for a dollar") from None


def compute_events(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("pid", 0) == 0 and e.get("cat") != "comm"]


def events_of(trace: dict, cat: str) -> list[dict]:
    """The spans of one category outside the actions: "comm" (transfers), "update" (optimizer)
    or "allreduce" events."""
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat]


def row_names(trace: dict, ranks: int) -> list[str]:
    """"rank r", or across processes with replicas "replica d rank p" (process w = d D + p)."""
    other = trace.get("otherData") or {}
    replicas, d = int(other.get("replicas", 1) or 1), int(other.get("devices", 0) or 0)
    if replicas > 1 and d > 0:
        return [f"replica {w // d} rank {w % d}" for w in range(ranks)]
    return [f"rank {r}" for r in range(ranks)]


def parse_actions(event: dict) -> list[tuple[str, int, int]]:
    """(op, stage, mb) of each action in an event: one, or two for an overlapped pair."""
    found = [(op, int(s), int(m)) for op, s, m in ACTION_RE.findall(str(event.get("name", "")))]
    if found:
        return found
    args = event.get("args") or {}
    return [(str(event.get("cat", "?")), int(args.get("stage", -1)), int(args.get("mb", -1)))]


def build_boxes(events: list[dict]) -> tuple[list[Box], int]:
    """Boxes for the compute events, and the number of ranks."""
    actions = [parse_actions(e) for e in events]
    stages_per_rank: dict[int, set[int]] = {}
    max_mb = 0
    for e, acts in zip(events, actions):
        for _, stage, mb in acts:
            stages_per_rank.setdefault(int(e.get("tid", 0)), set()).add(stage)
            max_mb = max(max_mb, mb)
    multi_stage = any(len(s) > 1 for s in stages_per_rank.values())
    boxes = []
    for e, acts in zip(events, actions):
        op = str(e.get("cat") or acts[0][0])
        if op not in OP_COLOURS:
            op = "FB" if len(acts) > 1 else acts[0][0]
        if multi_stage:
            label = "+".join(f"{s}.{m}" for _, s, m in acts)
        else:
            label = "+".join(str(m) for _, _, m in acts)
        mb = acts[0][2]
        boxes.append(Box(rank=int(e.get("tid", 0)), op=op, start=float(e["ts"]) / US_PER_UNIT,
                         dur=float(e.get("dur", 0)) / US_PER_UNIT, label=label,
                         shade=0.45 * mb / max_mb if max_mb > 0 else 0.0))
    if stages_per_rank and not 0 <= min(stages_per_rank) <= max(stages_per_rank) < MAX_RANKS:
        tid = min(stages_per_rank) if min(stages_per_rank) < 0 else max(stages_per_rank)
        raise InputError(f"a compute event's tid (its rank) is {tid}: one row per rank is drawn, "
                         f"so it must be 0 to {MAX_RANKS - 1}")
    ranks = max(stages_per_rank) + 1 if stages_per_rank else 0
    return boxes, ranks


def lighten(hex_colour: str, amount: float) -> tuple[float, float, float]:
    """A "#RRGGBB" colour of this file, `amount` of the way to white, as RGB in 0..1."""
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def text_colour(rgb: tuple[float, float, float]) -> str:
    _, lightness, _ = colorsys.rgb_to_hls(*rgb)
    return "black" if lightness > 0.55 else "white"


def is_measured(trace: dict) -> bool:
    """A trace of real time (`ppbench run`), not of simulator cost units."""
    other = trace.get("otherData") or {}
    return str(other.get("time_unit", "")) in MEASURED_TIME_UNITS


def machine(trace: dict) -> str:
    other = trace.get("otherData") or {}
    text = str(other.get("cpu") or other.get("host") or "an unnamed machine")
    if other.get("cpu_cores"):
        text += f" ({other['cpu_cores']} cores)"
    return text


def default_title(trace: dict, makespan: float, label: str | None = None) -> str:
    other = trace.get("otherData") or {}
    if label:
        parts = [label]
    else:
        parts = [str(other.get("schedule", "schedule"))]
        for key, sym in (("devices", "D"), ("microbatches", "N"), ("replicas", "R")):
            if key in other and not (key == "replicas" and int(other[key] or 1) <= 1):
                parts.append(f"{sym}={other[key]}")
        if int(other.get("chunks", 1) or 1) > 1:
            parts.append(f"v={other['chunks']}")
    if is_measured(trace):
        return " ".join(parts) + f", measured on {machine(trace)}  (makespan {makespan:.4g} ms)"
    return " ".join(parts) + f"  (makespan {makespan:g})"


def plot_timeline(trace: dict, out: Path, title: str | None = None, dpi: int = 110,
                  width: float | None = None, label: str | None = None) -> None:
    boxes, ranks = build_boxes(compute_events(trace))
    if not boxes:
        raise InputError("the trace has no compute events (ph 'X', pid 0)")
    updates = events_of(trace, "update")
    allreduces = events_of(trace, "allreduce")
    # The step runs from its first action, update or all-reduce to the last one's end.
    spans = [(b.start, b.start + b.dur) for b in boxes] + [
        (float(e["ts"]) / US_PER_UNIT, (float(e["ts"]) + float(e.get("dur", 0))) / US_PER_UNIT)
        for e in updates + allreduces]
    t0 = min(start for start, _ in spans)
    makespan = max(end for _, end in spans) - t0
    if not makespan > 0:  # the axis and the labels' room are per unit of time
        raise InputError("the trace's events span no time (every compute event has dur 0 and "
                         "starts at the same ts): nothing to draw")
    measured = is_measured(trace)
    if width is None:  # wide enough for one-unit boxes to hold a label, within reason
        width = 16.0 if measured else min(20.0, max(12.0, 0.3 * makespan))
    height = 0.8
    fig_size = (width, 1.3 + 0.42 * ranks)
    pixels = [round(side * dpi) for side in fig_size]
    if max(pixels) > MAX_SIDE_PIXELS or pixels[0] * pixels[1] > MAX_PIXELS:
        raise InputError(f"the figure of {ranks} ranks would be {pixels[0]} x {pixels[1]} pixels "
                         f"(at most {MAX_SIDE_PIXELS} a side and {MAX_PIXELS} in all): lower "
                         "--dpi or --width")
    plt = pyplot("plot_timeline")
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch
    fig, ax = plt.subplots(figsize=fig_size, dpi=dpi)

    # Idle background: everything not covered by a box on a rank's row.
    ax.add_collection(PolyCollection(
        [rect(0, makespan, r, height) for r in range(ranks)], facecolors=IDLE_COLOUR,
        edgecolors="none", zorder=0))
    colours = [lighten(OP_COLOURS[b.op], b.shade) for b in boxes]
    ax.add_collection(PolyCollection(
        [rect(b.start - t0, b.dur, b.rank, height) for b in boxes], facecolors=colours,
        edgecolors="white", linewidths=0.4 if len(boxes) < 2000 else 0.0, zorder=2))
    has_comm = draw_comm(ax, trace, t0, ranks, height)
    # Updates fill their row as the actions do; all-reduces, beside the actions, a strip on top.
    has_updates = draw_spans(ax, updates, t0, ranks, 0.0, height, UPDATE_COLOUR, zorder=2)
    has_allreduces = draw_spans(ax, allreduces, t0, ranks, -height / 2 + 0.06, 0.12,
                                ALLREDUCE_COLOUR, zorder=3)
    draw_labels(ax, boxes, colours, t0, makespan, width)

    ax.set_xlim(0, makespan)
    ax.set_ylim(ranks - 0.5, -0.5)  # rank 0 at the top
    ax.set_yticks(range(ranks), row_names(trace, ranks))
    ax.set_xlabel("time (ms)" if measured else "time (cost units)")
    ax.set_title(title or default_title(trace, makespan, label))
    ops = [op for op in OP_COLOURS if any(b.op == op for b in boxes)]
    handles = [Patch(color=OP_COLOURS[op], label=OP_NAMES[op]) for op in ops]
    handles.append(Patch(color=IDLE_COLOUR, label="idle"))
    if has_comm:
        handles.append(Patch(color=COMM_COLOUR, label="comm"))
    if has_updates:
        handles.append(Patch(color=UPDATE_COLOUR, label="optimizer update"))
    if has_allreduces:
        handles.append(Patch(color=ALLREDUCE_COLOUR, label="all-reduce"))
    fig_height = fig.get_size_inches()[1]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=8)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    fig.tight_layout(rect=(0, 0.35 / fig_height, 1, 1))  # keep 0.35 in for the legend
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, out, dpi=dpi)
    plt.close(fig)


def rect(x: float, w: float, row: float, height: float) -> list[tuple[float, float]]:
    y0, y1 = row - height / 2, row + height / 2
    return [(x, y0), (x + w, y0), (x + w, y1), (x, y1)]


def draw_spans(ax, events: list[dict], t0: float, ranks: int, offset: float, height: float,
               colour: str, zorder: int, row=lambda e: e.get("tid")) -> bool:
    """Each event as a rectangle `height` high, centred `offset` below the row of its rank
    (`row(event)`: its tid unless told); returns whether any were drawn (zero-duration events
    are not)."""
    shapes = []
    for e in events:
        rank, dur = row(e), float(e.get("dur", 0)) / US_PER_UNIT
        if isinstance(rank, int) and 0 <= rank < ranks and dur > 0:
            shapes.append(rect(float(e["ts"]) / US_PER_UNIT - t0, dur, rank + offset, height))
    if shapes:
        from matplotlib.collections import PolyCollection
        ax.add_collection(PolyCollection(shapes, facecolors=colour, edgecolors="none",
                                         zorder=zorder))
    return bool(shapes)


def draw_comm(ax, trace: dict, t0: float, ranks: int, height: float) -> bool:
    """Thin dark strips along the bottom of the receiving rank's row while a transfer is in
    flight; returns whether any were drawn."""
    return draw_spans(ax, events_of(trace, "comm"), t0, ranks, height / 2 - 0.05, 0.1,
                      COMM_COLOUR, zorder=3,
                      row=lambda e: (e.get("args") or {}).get("dst", e.get("tid")))


def draw_labels(ax, boxes: list[Box], colours, t0: float, makespan: float,
                width: float) -> None:
    """Label each box in the largest font (7, 6 or 5 pt) its text fits; tiny boxes stay bare."""
    points_per_unit = 0.85 * width * 72 / makespan
    for b, c in zip(boxes, colours):
        room = b.dur * points_per_unit - 2
        size = next((f for f in (7, 6, 5) if 0.6 * f * len(b.label) <= room), None)
        if size is not None:
            ax.text(b.start - t0 + b.dur / 2, b.rank, b.label, ha="center", va="center",
                    fontsize=size, color=text_colour(c), zorder=4, clip_on=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="plot_timeline",
        description="Plot a per-rank pipeline timeline (PNG) from a ppbench trace.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path,
                        help="trace JSON from `ppbench simulate|run --trace-out`")
    parser.add_argument("--out", type=Path, help="output PNG (default: TRACE with .png)")
    parser.add_argument("--title", help="figure title (default: schedule, D, N, makespan and, "
                                        "for a measured trace, the machine)")
    parser.add_argument("--label", help="what the trace shows (e.g. 'transformer 1f1b D=4 N=8'), "
                                        "used in the default title instead of otherData")
    parser.add_argument("--dpi", type=number(int, *DPI_RANGE), default=110,
                        help="resolution, %d to %d (default: %%(default)s)" % DPI_RANGE)
    parser.add_argument("--width", type=number(float, *WIDTH_RANGE),
                        help="figure width in inches, %g to %g (default: 12 to 20, by makespan)"
                             % WIDTH_RANGE)
    args = parser.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit 0 with the figure written; a bad option (a --title or --label matplotlib cannot
    draw), an unreadable trace or one of another shape (a span whose ts or dur is not finite, a
    negative dur, events that span no time) raise InputError (exit 2 through run), before
    anything is written."""
    args = parse_args(argv)
    trace = load_trace(args.trace)
    out = output_path(args.out or args.trace.with_suffix(".png"), "--out")
    out = output_path(figure_path(out, "--out"), "--out")
    # Named as the options they are: drawn in the title, a failure would read as the trace's.
    check_text(args.title, "--title")
    check_text(args.label, "--label")
    with shaped(f"trace {args.trace}"):
        try:
            plot_timeline(trace, out, args.title, args.dpi, args.width, args.label)
        except InputError as e:
            raise InputError(f"trace {args.trace}: {e}") from None
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run("plot_timeline", main))
