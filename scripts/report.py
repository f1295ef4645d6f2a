#!/usr/bin/env python3
"""Generate the markdown report from sweep results (JSON Lines from scripts/sweep.py), by paper.

One top-level section per paper that the records reproduce (scripts/report_papers.py says which
paper each schedule family belongs to), in this order: GPipe, PipeDream-Flush / 1F1B (DAPPLE),
Megatron-LM interleaved 1F1B, breadth-first, Chimera, Zero Bubble, controllable-memory V shapes,
DualPipe, the lectures' textbook examples, data x pipeline parallelism; then "Other schedules"
(families no paper claims), "All schedules together" (the bubble figures, where the measured
records come from) and "Latest against the reference". A contents list opens the report; a
section without data is left out. Within a paper's section:
  - the paper's own tables, from the files that reproduce them: GPipe's Tables 2 and 3
    (--gpipe-tables, scripts/gpipe_tables.py), Zero Bubble's Table 5 (--zb-table5,
    scripts/zb_table5.py), DualPipe's Table 2 from the records' closed forms and simulation, and
    measured on this machine (--dualpipe-measured, scripts/dualpipe_measured.py), the lectures'
    activation-memory example, the data x pipeline predictions (--dp-scaling,
    scripts/dp_scaling.py);
  - the bubble fraction of its schedules against N for each D and cost setting, simulated with
    the closed form beside it ("0.2727 (0.2727)");
  - with --measured RESULTS.jsonl (`ppbench run` rows): its schedules' measured points, with the
    theory (closed form for uniform costs), the simulation at uniform costs, the replay of the
    step's measured costs, the measurement, their gap, throughput and activation bytes; with
    --reference-measured the reference's measured bubble and throughput beside them;
  - 1F1B's throughput against devices (from --gpipe-tables) and the memory figures;
  - with --figures DIR: the figures `make plots` draws for it (timelines, memory).
Every table names its source and the machine and commit of each measured column (from the
records' provenance), says why a column it lacks is empty, and ends with "what differs and why",
computed from the data. With --html PATH the same report is also written as one self-contained
HTML page (scripts/report_html.py: figures inline as data: URIs).

No formula is written or evaluated here: formulas and their values come from the records'
"closed_form" fields (ppbench's registry, the one home of the closed forms); schedule order
comes from `ppbench list --format json` with --ppbench (else the order in the data). Every
number comes from the results files. The report is written atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

from report_papers import DATA_PIPELINE, DUALPIPE, GPIPE, LECTURES, ONE_F_ONE_B, PAPERS, \
    ZERO_BUBBLE, Section, paper_of, render
from report_html import markdown_to_html
from results_io import PpbenchError, atomic_write, latest_rows, load_records, order_key, \
    schedule_order, schedule_registry

DEFAULT_COST = "F=1,B=2"
DASH = "—"
# Sort key of a series label; build_report sets it from the registry (or the data) first.
SortKey = Callable[[str], tuple[int, str]]


# --- loading ---------------------------------------------------------------------------------


def field(row: dict, key: str, default: Any = None) -> Any:
    """A parameter of a row: top level (ok rows) or the requested point (failed rows)."""
    if row.get(key) is not None:
        return row[key]
    return (row.get("point") or {}).get(key, default)


def cost_of(row: dict) -> str:
    return str(field(row, "cost", "") or "")


def series_label(row: dict) -> str:
    label = str(field(row, "schedule"))
    chunks = field(row, "chunks")
    if chunks is not None and int(chunks) > 1:
        label += f" v={chunks}"
    # The group size the point asked for: a record holds the one the generator resolved (D by
    # default), which would split one series into its valid and its invalid points.
    point = row.get("point")
    group = point.get("group_size") if isinstance(point, dict) else field(row, "group_size")
    if group:
        label += f" g={group}"
    return label


def fmt(x: Any) -> str:
    """A count or a time in cost units: 21, 0.5, 6.333."""
    if x is None:
        return DASH
    return f"{x:.4g}" if isinstance(x, (int, float)) else str(x)


# --- header ----------------------------------------------------------------------------------

def provenance_values(rows: list[dict], key: str) -> str:
    provs = [r["provenance"] for r in rows if isinstance(r.get("provenance"), dict)]
    seen = sorted({str(p[key]) for p in provs if p.get(key) is not None and p.get(key) != ""})
    return ", ".join(seen) if seen else "unknown"


def date_range(rows: list[dict]) -> str:
    dates = sorted(str(r["provenance"]["date"]) for r in rows
                   if isinstance(r.get("provenance"), dict) and r["provenance"].get("date"))
    if not dates:
        return "unknown"
    return f"{dates[0]} … {dates[-1]}" if dates[0] != dates[-1] else dates[0]


def status_counts(rows: list[dict]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        counts[r.get("status", "ok")] += 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def who_made(rows: list[dict]) -> str:
    """commit …; machine host …, CPU … (cores); GPU …; dates …: who made a set of records."""
    gpus = sorted({str(n) for r in rows if isinstance(r.get("gpu"), dict)
                   for n in r["gpu"].get("gpu_names") or [] if n})
    gpu = f"; GPU {', '.join(gpus)}" if gpus else ""
    return (f"commit {provenance_values(rows, 'git_commit')}; machine: host "
            f"{provenance_values(rows, 'host')}, CPU {provenance_values(rows, 'cpu')} "
            f"({provenance_values(rows, 'cpu_cores')} cores){gpu}; dates {date_range(rows)}")


def header(rows: list[dict], source: str, reference: list[dict] | None = None,
           reference_source: str = "", registry_order: bool = False) -> list[str]:
    out = [
        "# ppbench results",
        "",
        "<!-- Generated by scripts/report.py; do not edit by hand. `make report` regenerates "
        "results/latest/REPORT.md; docs/bench.md says how to regenerate results/REPORT.md from "
        "results/reference/. -->",
        "",
        f"Generated by `scripts/report.py` from `{source}` ({len(rows)} rows: "
        f"{status_counts(rows)}).",
        "",
        f"- ppbench commit: {provenance_values(rows, 'git_commit')} (version "
        f"{provenance_values(rows, 'ppbench_version')})",
        f"- run date: {date_range(rows)}",
        f"- machine: {provenance_values(rows, 'host')}; CPU {provenance_values(rows, 'cpu')}; "
        f"compiler {provenance_values(rows, 'compiler')}; CUDA {provenance_values(rows, 'cuda')}",
    ]
    if reference:
        out.append(f"- reference: `{reference_source}` ({len(reference)} rows), "
                   f"{who_made(reference)}; compared in the last section")
    out += [
        "",
        "Definitions: `bubble_fraction` = Σ idle / (ranks × makespan), idle_r = makespan − busy_r "
        "(GPipe's (D−1)/(D−1+N) is this quantity). Costs are in simulator units per stage and "
        "micro-batch; F = forward, B = full backward = I + W, F&B = an overlapped pair. Closed "
        "forms are the ones ppbench's schedule registry states (`ppbench list`), as each record "
        "carries them; schedules are listed in "
        + ("the registry's order (`ppbench list --format json`)." if registry_order
           else "the order the records first name them."),
        "",
        "The report is organised by paper: each section reproduces what one paper (or the "
        "lectures) published, its tables setting the paper's numbers, the theory (closed form), "
        "ppbench's simulation and ppbench's measurement side by side where the data exists "
        f"({DASH} and a sentence saying why where it does not). Each table names its source and "
        "the machine and commit of every measured column, and ends with what still differs and "
        "why, computed from the records.",
        "",
    ]
    return out


def cell(text: Any) -> str:
    """Text for a markdown table cell (pipes escaped)."""
    return DASH if text in (None, "") else str(text).replace("|", "\\|")


# --- bubble tables ---------------------------------------------------------------------------

def bubble_cell(row: dict | None) -> str:
    if row is None:
        return ""
    status = row.get("status", "ok")
    if status != "ok":
        return "invalid" if status == "invalid" else "error"
    closed = (row.get("closed_form") or {}).get("bubble_fraction")
    return f"{fraction(row.get('bubble_fraction'))} ({fraction(closed)})"


def fraction(x: Any) -> str:
    return DASH if x is None else f"{float(x):.4f}"


def bubble_tables(rows: list[dict], sort_key: SortKey, measured_note: str = "",
                  source: str = "") -> list[str]:
    """Simulated bubble beside the closed form, one table per (costs, D), then what differs."""
    by_cost: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_cost[cost_of(r)].append(r)
    costs = sorted(by_cost, key=lambda c: (c != DEFAULT_COST, c))
    tables: list[str] = []
    for cost in costs:
        for d, table in sorted(bubble_tables_for(by_cost[cost], sort_key).items()):
            tables += [f"#### D = {d}, costs {cost or 'default'}", ""] + table + [""]
    if not tables:
        return []
    out = [(f"Source: the paper's bubble formula as ppbench's registry states it; simulated "
            f"records `{source}`. " if source else "")
           + "Each cell: ppbench's simulated `bubble_fraction`, the theory in parentheses (the "
           "closed form in the last column, as ppbench's registry states it, evaluated for the "
           f"point; {DASH} where it states no value for it). `invalid`: parameters the "
           "schedule's definition does not allow; empty: not run. No paper column: the paper "
           "gives its bubble as a formula (the theory), not as numbers at these points. "
           + (measured_note or "No measured run of these schedules is in the records given "
              "(`--measured`), so there is no measurement column."), ""]
    return out + tables + bubble_differences(rows)


def bubble_differences(rows: list[dict]) -> list[str]:
    """What differs between simulation and theory, from the records: equal cells, the largest
    gap, the points without a closed-form value and why."""
    ok = [r for r in rows if r.get("status", "ok") == "ok"]
    valued = [r for r in ok if (r.get("closed_form") or {}).get("bubble_fraction") is not None
              and r.get("bubble_fraction") is not None]
    same = [r for r in valued if fraction(r["bubble_fraction"]) ==
            fraction(r["closed_form"]["bubble_fraction"])]
    text = (f"**What differs and why.** Of {len(valued)} simulated points with a closed-form "
            f"value, {len(same)} equal it to four decimals")
    if valued and len(same) == len(valued):
        text += ": the simulation reproduces the theory wherever the theory gives a value"
    elif valued:
        worst = max(valued, key=lambda r: abs(float(r["bubble_fraction"]) -
                                               float(r["closed_form"]["bubble_fraction"])))
        gap = float(worst["bubble_fraction"]) - float(worst["closed_form"]["bubble_fraction"])
        text += (f"; the largest gap is {gap:+.4f} ({series_label(worst)}, D = "
                 f"{field(worst, 'devices')}, N = {field(worst, 'microbatches')}, costs "
                 f"{cost_of(worst) or 'default'})")
        if len(same) < len(valued):
            text += ": there the schedule ppbench generates idles otherwise than the formula " \
                    "assumes (docs/papers.md discusses each family)"
    text += "."
    valued_ids = {id(r) for r in valued}

    def formula(r: dict) -> str:
        return str((r.get("closed_form") or {}).get("bubble_formula") or "")

    # A family whose paper gives no formula ("none published", "none claimed") is not a formula
    # outside its condition: it is said apart.
    unpublished = [r for r in ok if id(r) not in valued_ids and formula(r).startswith("none")]
    unvalued = [r for r in ok if id(r) not in valued_ids and not formula(r).startswith("none")]
    if unvalued:
        formulas = sorted({f"`{cell(formula(r))}` ({series_label(r)})" for r in unvalued})
        text += (f" {len(unvalued)} points have no closed-form value: the formula holds only "
                 "under its stated condition or range, which those costs or N do not meet, so "
                 "ppbench evaluates none (" + "; ".join(formulas) + ").")
    if unpublished:
        families = sorted({series_label(r) for r in unpublished})
        text += (f" {len(unpublished)} points are of a schedule whose paper publishes no bubble "
                 "formula, so only the simulation speaks for them (" + ", ".join(families) + ").")
    invalid = sum(r.get("status") == "invalid" for r in rows)
    if invalid:
        text += (f" {invalid} points are `invalid`: the schedule's constraints (`ppbench list`) "
                 "do not allow them.")
    return [text, ""]


def bubble_tables_for(rows: list[dict], sort_key: SortKey) -> dict[int, list[str]]:
    """D -> markdown table lines; only series with at least two N values (a sweep over N)."""
    grid: dict[int, dict[str, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    formulas: dict[str, str] = {}
    for r in rows:
        d, n, label = int(field(r, "devices")), int(field(r, "microbatches")), series_label(r)
        grid[d][label][n] = r
        formula = (r.get("closed_form") or {}).get("bubble_formula")
        if formula:
            formulas[label] = formula
    tables = {}
    for d, series in grid.items():
        series = {k: v for k, v in series.items() if len(v) >= 2}
        if not series:
            continue
        ns = sorted({n for v in series.values() for n in v})
        lines = ["| schedule | " + " | ".join(f"N={n}" for n in ns) + " | closed form |",
                 "|---|" + "---|" * len(ns) + "---|"]
        for label in sorted(series, key=sort_key):
            cells = [bubble_cell(series[label].get(n)) for n in ns]
            formula = formulas.get(label, DASH).replace("|", "\\|")
            lines.append(f"| {label} | " + " | ".join(cells) + f" | `{formula}` |")
        tables[d] = lines
    return tables


# --- DualPipe's Table 2 ----------------------------------------------------------------------

# The rows of the DualPipe paper's table (DeepSeek-V3 report, Table 2): its label and the
# schedule that reproduces it. Formulas and their values come from the records' closed_form.
PAPER_ROWS: list[tuple[str, str]] = [
    ("1F1B", "1f1b"),
    ("ZB1P", "zb-h1"),
    ("DualPipe", "dualpipe"),
    ("DualPipeV", "dualpipev"),
]


def paper_devices(schedule: str, pp: int) -> int:
    """Ranks that run the paper's PP stages: DualPipeV folds PP stages onto PP/2 devices (its V
    shape, `ppbench list`); the others run one stage per rank in each direction."""
    return pp // 2 if schedule == "dualpipev" else pp


def idle_per_rank(row: dict) -> str:
    idles = [r.get("idle") for r in row.get("ranks") or [] if r.get("idle") is not None]
    if not idles:
        return DASH
    lo, hi = min(idles), max(idles)
    return fmt(float(lo)) if lo == hi else f"{fmt(float(lo))}–{fmt(float(hi))}"


def closed_value(row: dict, formula_key: str, value_key: str) -> str:
    """`formula` = value from the record's closed_form; where ppbench evaluated no value for the
    point's costs (a condition of the formula does not hold), say so."""
    closed = row.get("closed_form") if isinstance(row.get("closed_form"), dict) else None
    if closed is None:
        return f"{DASH} (the record states no closed form)"
    formula = closed.get(formula_key)
    value = closed.get(value_key)
    text = f"`{cell(formula)}`" if formula else "no formula stated"
    if value is not None:
        return f"{text} = {fmt(value)}"
    note = closed.get("note")
    why = note if note else (f"not defined for costs {cost_text(row)}: they do not satisfy its "
                             "condition")
    return f"{text}: {DASH} ({cell(why)})"


def cost_text(row: dict) -> str:
    costs = row.get("costs") if isinstance(row.get("costs"), dict) else {}
    if costs:
        return ",".join(f"{k}={fmt(costs[k])}" for k in ("F", "B", "I", "W", "FB") if k in costs)
    return cost_of(row) or "default"


def find_row(rows: Iterable[dict], **want: Any) -> dict | None:
    found = None
    for r in rows:
        if all(field(r, k) == v for k, v in want.items()):
            if found is None or r.get("status") == "ok":
                found = r
    return found


def dualpipe_table(rows: list[dict], pp: int, cost: str, ns: list[int]) -> list[str]:
    candidates = [r for r in rows if cost_of(r) == cost]
    compared: list[dict] = []
    out = [f"Source: the DualPipe paper's table (DeepSeek-V3 report, Table 2) at PP = {pp} "
           "stages, costs "
           f"{cost or 'default'} (DualPipeV runs the PP stages on PP/2 devices). The paper's "
           "columns: *Bubble* is the idle time of a pipeline rank in one step, in the costs' "
           "units; *Parameter* is the parameter memory of a device relative to 1F1B on PP "
           "devices; *Activation* is the peak number of micro-batch activations a device holds, "
           "in units of one stage's activation of one micro-batch. Closed-form columns: the "
           "formula ppbench's schedule registry states for the schedule and its value for the "
           "point's costs, as the record carries them (`closed_form`: `idle_formula` = "
           "`idle_per_rank`, `params`, `activations_formula` = `peak_activations`). Simulated "
           "columns: ppbench's simulation of the same point; idle per rank is makespan − busy "
           "(min–max over ranks when they differ), parameter memory is PP × model copies / "
           "devices, the peak is the most (stage, micro-batch) activations alive on one rank. "
           "The paper's numbers are its formulas, the closed-form columns here; ppbench's "
           "measurement of the same comparison is the next subsection.",
           ""]
    for n in ns:
        out += [f"#### PP = {pp}, N = {n}", "",
                "| Method | schedule | Bubble (closed form) | Bubble (simulated idle per rank) "
                "| Parameter (closed form; simulated) | Activation (closed form) "
                "| Activation (simulated peak) |",
                "|---|---|---|---|---|---|---|"]
        for label, schedule in PAPER_ROWS:
            devices = paper_devices(schedule, pp)
            row = find_row(candidates, schedule=schedule, devices=devices, microbatches=n)
            if row is None or row.get("status", "ok") != "ok":
                why = "not run" if row is None else f"{row.get('status')}: {row.get('error', '')}"
                out.append(f"| {label} | `{schedule}` D={devices} | {cell(why)} | {DASH} | "
                           f"{DASH} | {DASH} | {DASH} |")
                continue
            closed = row.get("closed_form") if isinstance(row.get("closed_form"), dict) else {}
            copies = row.get("param_copies")
            sim_params = f"{pp * copies / devices:g}×" if copies else DASH
            out.append(f"| {label} | `{schedule}` D={devices} | "
                       f"{closed_value(row, 'idle_formula', 'idle_per_rank')} | "
                       f"{idle_per_rank(row)} | {cell(closed.get('params'))}; simulated "
                       f"{sim_params} | "
                       f"{closed_value(row, 'activations_formula', 'peak_activations')} | "
                       f"{fmt(row.get('peak_activations'))} |")
            compared.append(row)
        out.append("")
    return out + dualpipe_differences(compared)


def dualpipe_differences(rows: list[dict]) -> list[str]:
    """Which rows' simulated idle and peak equal the closed form's values."""
    if not rows:
        return ["**What differs and why.** No point of the table was simulated ok, so nothing is "
                "compared.", ""]
    differ = []
    for r in rows:
        closed = r.get("closed_form") if isinstance(r.get("closed_form"), dict) else {}
        idles = [x.get("idle") for x in r.get("ranks") or [] if x.get("idle") is not None]
        checks = (("idle", closed.get("idle_per_rank"), max(idles) if idles else None),
                  ("activation peak", closed.get("peak_activations"), r.get("peak_activations")))
        for what, want, got in checks:
            if want is None or got is None or not same_number(want, got, 1e-6):
                differ.append(f"{r.get('schedule')} N = {field(r, 'microbatches')}: {what} "
                              f"closed form {fmt(want)}, simulated {fmt(got)}")
    if not differ:
        return [f"**What differs and why.** Nothing: in all {len(rows)} rows the simulated "
                "idle of the most idle rank and the simulated activation peak equal the values "
                "of the paper's formulas. The paper's figures are formulas, not measurements, "
                "so the measured comparison is the subsection below.", ""]
    return ["**What differs and why.** " + "; ".join(differ) + ". A value the record does "
            "not state (—) is a formula whose condition the costs do not meet.", ""]


# --- DualPipe's Table 2 measured on this machine ---------------------------------------------

def ms(seconds: Any) -> str:
    """Seconds in ms, three significant digits without an exponent."""
    if seconds is None:
        return DASH
    value = 1e3 * float(seconds)
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def ms_range(values: list[float] | None) -> str:
    """Per-rank values in ms: one figure when they agree to the shown digits, else min–max."""
    if not values:
        return DASH
    lo, hi = ms(min(values)), ms(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def measured_dualpipe_row(r: dict) -> str:
    b, p, a = r["bubble"], r["params"], r["activations"]
    where = f"D={r['devices']}" + (" (oversubscribed)" if r.get("oversubscribed") else "")
    units = a["measured_peak_units_per_rank"]
    lo, hi = min(units), max(units)
    act = f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}"
    counts = a.get("peak_count_per_rank") or []
    count = f"; count {max(counts):g}" if counts else ""
    return (f"| {r['method']} | `{r['schedule']}` {where} | {r['pp']} | "
            f"{ms_range(b['measured_idle_per_rank_s'])} (max {b['measured_idle_max_in_F']:.2f} F) | "
            f"`{cell(b['paper_formula'])}` = {ms(b['formula_s'])} ({b['formula_in_F']:.2f} F) | "
            f"{ms_range(b.get('predicted_idle_per_rank_s'))} | "
            f"{p['relative_to_1f1b']:.2f}× ({p['paper']}) | {act}{count} ({a['paper']} = "
            f"{a['paper_value']}) |")


def measured_costs_row(r: dict) -> str:
    c = r["costs_s"]
    w = ms(c["W"]) if r.get("w_measured", True) else f"{DASH} (B not split)"
    fb = ms(c["FB"]) if r.get("fb_measured", True) else f"{DASH} (no pairs)"
    return (f"| {r['method']} | {r['pp']} | {ms(c['F'])} | {ms(c['B'])} | {w} | {fb} | "
            f"{ms(r['step_time_s'])} | {r['bubble']['bubble_fraction']:.3f} |")


def measured_dualpipe_section(table: dict | None, source: str) -> list[str]:
    """The DualPipe comparison run for real, as scripts/dualpipe_measured.py recorded it."""
    if not table:
        return []
    cfg, prov = table["config"], table["provenance"]
    out = [f"Source: {table.get('source', 'the DeepSeek-V3 report, Table 2')}, run for real; "
           f"from `{source}` (`scripts/dualpipe_measured.py`): the same four methods trained for "
           f"real with `ppbench run --backend {cfg['backend']}` (one thread per rank), "
           f"`{cfg['workload']}`, "
           f"N = {cfg['microbatches']}, {cfg['steps']} measured steps after {cfg['warmup']} "
           f"warm-up, optimizer {cfg['optimizer']}, {cfg['repeats']} runs per point. Machine: "
           f"host {prov.get('host')}, CPU {prov.get('cpu')} ({prov.get('cpu_cores')} cores), "
           f"ppbench built from commit {prov.get('git_commit')}"
           + (f" (source tree at {prov['source_tree_commit']})"
              if prov.get("source_tree_commit") else "")
           + f"; load average {prov.get('load_average_before')} "
           f"before and {prov.get('load_average_after')} after (1, 5, 15 min).", "",
           "Columns: *measured idle* is makespan − busy per rank of the last measured step (ms, "
           "median over the runs; min–max over ranks), also in units of the measured F; *paper's "
           "formula* is the paper's bubble evaluated with the run's own measured F, B, W and F&B "
           "(`run --profile-out`: per-stage medians, averaged over the stages), in ms and in "
           "units of F; *replay* is ppbench's simulator replaying the same step's measured "
           "costs; *Parameter* is the most parameters a rank holds relative to 1F1B with the "
           "same PP stages (counted by `ppbench memory`, not measured; the paper's value in "
           "parentheses); *Activation* is the measured peak of activation bytes a rank keeps "
           "(`activation_bytes[].measured_peak_bytes`, after each action) in units of one "
           "stage's micro-batch activation (the mean over the stages the rank holds; min–max "
           "over ranks), with the most (stage, "
           "micro-batch) activations alive on a rank (`measured.ranks[].peak_activations`, "
           "*count*; the paper's value in parentheses). A point with more ranks than cores is oversubscribed: its threads "
           "share cores, so its busy times include waiting for one.", ""]
    for comp in table["comparisons"]:
        rows = comp["rows"]
        out += [f"#### {comp['title']}", "",
                "| Method | schedule | PP | Bubble: measured idle per rank (ms) | Bubble: paper's "
                "formula, measured costs (ms) | Bubble: replay (ms) | Parameter vs 1F1B "
                "(paper) | Activation peak, stage units (paper) |",
                "|---|---|---|---|---|---|---|---|"]
        out += [measured_dualpipe_row(r) for r in rows]
        out += ["", "The measured costs (means over the stages of the per-stage medians, median over "
                "the runs), the step time (`step_time_s`, median) and the measured "
                "bubble_fraction. The CPU runs the two halves of an F&B pair one after the "
                "other, so F&B is about F + B here, not less, as the overlap the paper counts on "
                "would make it.", "",
                "| Method | PP | F (ms) | B (ms) | W (ms) | F&B (ms) | step (ms) | "
                "bubble_fraction |", "|---|---|---|---|---|---|---|---|"]
        out += [measured_costs_row(r) for r in rows] + [""]
        gaps = []
        for r in rows:
            b = r["bubble"]
            # The spread over the runs says how much of a gap the machine's load alone makes.
            runs = b.get("measured_idle_max_per_run_s") or []
            spread = f" (runs {ms(min(runs))}–{ms(max(runs))} ms)" if len(runs) > 1 else ""
            if b["formula_s"] > 0:
                gaps.append(f"{r['method']} {b['measured_idle_max_s'] / b['formula_s']:.2f}×"
                            f"{spread}")
            else:
                gaps.append(f"{r['method']}: the formula gives {ms(b['formula_s'])} ms, "
                            f"measured {ms(b['measured_idle_max_s'])} ms{spread}")
        over = [r["method"] for r in rows if r.get("oversubscribed")]
        out += ["**What differs and why.** Measured idle of the most idle rank ÷ the paper's "
                "formula (the most idle rank's idle in each run, min–max): " + "; ".join(gaps)
                + ". The formula counts only the schedule's idle with equal stages and an F&B "
                "that overlaps its halves; a real step adds hand-overs, unequal stages and a "
                "machine shared with other work (the run-to-run range above)"
                + (f", and {', '.join(over)} ran more ranks than cores, so their ranks also "
                   "waited for a core" if over else "") + ".", ""]
    return out


# --- the lectures' activation-memory example -------------------------------------------------

# The textbook worked example (pipeline-parallelism lectures draw D = 4 GPUs, N = 8 micro-batches),
# quoted as stated, not evaluated here: (label, schedule, per-GPU activation in units of A as
# written, and its value).
TEXTBOOK_ACTIVATIONS = [
    ("naive model parallel", "naive", "1/4·A = 0.25·A", 0.25),
    ("GPipe", "gpipe", "8/4·A = 2.00·A", 2.0),
    ("1F1B", "1f1b", "4/4·A = 1.00·A", 1.0),
]


def activation_table(rows: list[dict], cost: str, devices: int = 4, n: int = 8) -> list[str]:
    candidates = [r for r in rows if cost_of(r) == cost] or rows
    out = [f"D = {devices}, N = {n}; A = the activations of one micro-batch through the whole "
           "model. Textbook: the value the lectures state (their paper's number). Closed form: "
           "the registry's `activations_formula` = `peak_activations` (stage activations on the "
           "most loaded rank) as the record carries it. Simulated: `peak_activation_share` of "
           "rank 0 (peak live activations × the share of the model its stages hold). No "
           "measurement column: the lectures count activations in units of A, which a real run "
           "does not have; the measured activation bytes per rank are in each paper's measured "
           "runs (peak act. MiB).", "",
           "| Schedule | Textbook | Closed form (peak activations) | Simulated peak, rank 0 | "
           "Peak activations, rank 0 |",
           "|---|---|---|---|---|"]
    gaps = []
    for label, schedule, stated, value in TEXTBOOK_ACTIVATIONS:
        row = find_row(candidates, schedule=schedule, devices=devices, microbatches=n)
        if row is None or row.get("status", "ok") != "ok":
            out.append(f"| {label} | {stated} | {DASH} | "
                       f"{'not run' if row is None else row['status']} | {DASH} |")
            continue
        rank0 = next((r for r in row.get("ranks") or [] if r.get("rank") == 0), {})
        share = rank0.get("peak_activation_share")
        share_text = DASH if share is None else f"{float(share):.2f}·A"
        if share is not None:
            gaps.append((abs(float(share) - value), label))
        out.append(f"| {label} | {stated} | "
                   f"{closed_value(row, 'activations_formula', 'peak_activations')} | "
                   f"{share_text} | {fmt(rank0.get('peak_activations'))} |")
    out.append("")
    if gaps:
        worst = max(gaps)
        out += [f"**What differs and why.** The largest gap between the simulated rank-0 peak and "
                f"the textbook's value is {worst[0]:.2f}·A ({worst[1]}) over the "
                f"{len(gaps)} schedules simulated"
                + (": ppbench reproduces the worked example." if worst[0] < 0.005 else
                   ": the textbook rounds or counts otherwise than ppbench's simulator.")
                + (f" {len(TEXTBOOK_ACTIVATIONS) - len(gaps)} were not simulated ok."
                   if len(gaps) < len(TEXTBOOK_ACTIVATIONS) else ""), ""]
    return out


# --- measured runs ---------------------------------------------------------------------------

def run_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if (field(r, "command") or "") == "run" or "measured" in r]


def machine_lines(rows: list[dict]) -> list[str]:
    return [f"- machine: CPU {provenance_values(rows, 'cpu')}, "
            f"{provenance_values(rows, 'cpu_cores')} cores, host "
            f"{provenance_values(rows, 'host')}; compiler {provenance_values(rows, 'compiler')}",
            f"- ppbench commit: {provenance_values(rows, 'git_commit')}; run dates: "
            f"{date_range(rows)}"]


def max_bytes(row: dict, key: str) -> float | None:
    values = [float(a[key]) for a in row.get("activation_bytes") or []
              if isinstance(a, dict) and isinstance(a.get(key), (int, float))]
    return max(values) if values else None


def mib(x: float | None) -> str:
    return DASH if x is None else f"{x / 2**20:.3g}"


def measured_bubble(row: dict | None) -> float | None:
    value = ((row or {}).get("measured") or {}).get("bubble_fraction")
    return float(value) if isinstance(value, (int, float)) else None


def samples_per_s(row: dict | None) -> float | None:
    value = ((row or {}).get("throughput") or {}).get("samples_per_s")
    return float(value) if isinstance(value, (int, float)) else None


def theory_key(row: dict, cost: str) -> tuple:
    return (series_label(row), int(field(row, "devices")), int(field(row, "microbatches")), cost)


def theory_index(rows: list[dict]) -> dict[tuple, dict]:
    """The ok simulated records by (series, D, N, costs): the uniform-cost simulation of a
    measured point."""
    return {theory_key(r, cost_of(r)): r for r in rows if r.get("status", "ok") == "ok"}


def uniform_cost(row: dict) -> str:
    """The costs the run's closed form was evaluated for (`closed_form_cost`)."""
    return str(row.get("closed_form_cost") or DEFAULT_COST)


def measured_line(row: dict, simulated: dict[tuple, dict],
                  reference: dict[str, dict] | None = None) -> str:
    measured = measured_bubble(row)
    predicted = (row.get("predicted") or {}).get("bubble_fraction")
    gap = None if measured is None or predicted is None else 100 * (measured - predicted)
    closed = (row.get("closed_form") or {}).get("bubble_fraction")
    uniform = simulated.get(theory_key(row, uniform_cost(row)), {}).get("bubble_fraction")
    rate = samples_per_s(row)
    step = row.get("step_time_s")
    line = (f"| {series_label(row)} | {field(row, 'devices')} | {field(row, 'microbatches')} | "
            f"{fraction(closed)} | {fraction(uniform)} | {fraction(predicted)} | "
            f"{fraction(measured)} | {DASH if gap is None else f'{gap:+.1f}'} | "
            f"{fmt(rate)} | {DASH if step is None else f'{1e3 * step:.4g}'} | "
            f"{mib(max_bytes(row, 'measured_peak_bytes'))} / "
            f"{mib(max_bytes(row, 'model_peak_bytes'))} |")
    if reference is not None:
        ref = reference.get(point_id(row))
        ref_ok = ref if ref is not None and ref.get("status", "ok") == "ok" else None
        line += (f" {fraction(measured_bubble(ref_ok)) if ref_ok else DASH} | "
                 f"{fmt(samples_per_s(ref_ok)) if ref_ok else DASH} |")
    return line


def point_id(row: dict) -> str:
    """The requested point of a row, without what says where it ran: matches a point of the
    latest records with the same point of the reference."""
    point = row.get("point") if isinstance(row.get("point"), dict) else {
        k: row.get(k) for k in ("command", "workload", "workload_flags", "schedule", "devices",
                                "microbatches", "chunks", "cost", "comm")}
    # Keys left at their defaults (None, false, 0, "") are dropped, so that records of an
    # older sweep.py, which lacked some keys, still match.
    return json.dumps({k: v for k, v in point.items() if v not in (None, False, "")},
                      sort_keys=True)


def workload_title(row: dict) -> str:
    flags = field(row, "workload_flags") or ""
    parts = [str(field(row, "workload"))]
    if flags:
        parts.append(f"`{flags}`")
    for key, sym in (("microbatch_size", "b"), ("dtype", "dtype"), ("steps", "steps"),
                     ("warmup", "warm-up")):
        value = field(row, key)
        if value is not None:
            parts.append(f"{sym} {value}")
    if field(row, "recompute"):
        parts.append("recompute")
    if field(row, "launcher") == "mpirun":
        # Its own table: the same point in threads is another measurement, not a duplicate.
        replicas = int(field(row, "replicas") or 1)
        parts.append(f"{int(field(row, 'devices')) * replicas} processes under mpirun"
                     + (f" ({replicas} replicas)" if replicas > 1 else ""))
    return ", ".join(parts)


def bubble_gaps(rows: list[dict]) -> list[tuple[float, dict]]:
    """(measured − predicted bubble_fraction in percentage points, row) of the ok runs."""
    return [(100 * (r["measured"]["bubble_fraction"] - r["predicted"]["bubble_fraction"]), r)
            for r in rows if r.get("status", "ok") == "ok"
            and isinstance((r.get("measured") or {}).get("bubble_fraction"), (int, float))
            and isinstance((r.get("predicted") or {}).get("bubble_fraction"), (int, float))]


def makespan_gaps(rows: list[dict]) -> list[tuple[float, dict]]:
    """(measured makespan / the replay's makespan − 1, in percent, row) of the ok runs: how far
    a run's step lands from the simulator's prediction from the same step's per-op costs."""
    return [(100 * (r["measured"]["makespan"] / r["predicted"]["makespan"] - 1), r)
            for r in rows if r.get("status", "ok") == "ok"
            and isinstance((r.get("measured") or {}).get("makespan"), (int, float))
            and isinstance((r.get("predicted") or {}).get("makespan"), (int, float))
            and r["predicted"]["makespan"] > 0]


def ranks_of(row: dict) -> int:
    """The ranks a run ran at once: its pipeline devices times its data-parallel replicas."""
    return int(field(row, "devices")) * int((row.get("point") or {}).get("replicas") or 1)


def machine_cores(rows: list[dict]) -> int | None:
    """The fewest cores among the machines that made these rows (None where none says)."""
    cores = {int(c) for r in rows for c in [(r.get("provenance") or {}).get("cpu_cores")]
             if isinstance(c, int)}
    return min(cores) if cores else None


# The issue's goal for CPU runs: the measured step within this many percent of the replay's.
STEP_GOAL_PCT = 5.0


def replayed_on_shared_cores(row: dict) -> bool:
    """Whether the run's replay shared the cores among its ranks as its threads did (ppbench
    records the cores in `predicted.cores` where its rank threads outnumbered them)."""
    return isinstance((row.get("predicted") or {}).get("cores"), int)


def step_time_sentence(ok: list[dict]) -> str:
    """How the measured steps land against the replay's makespans, the points that have a core
    per rank apart from those that share cores (whose ranks also wait for one)."""
    gaps = makespan_gaps(ok)
    if not gaps:
        return ""
    cores = machine_cores(ok)
    fits = [(g, r) for g, r in gaps if cores is None or ranks_of(r) <= cores]
    shared = [(g, r) for g, r in gaps if cores is not None and ranks_of(r) > cores]

    def span(part: list[tuple[float, dict]]) -> str:
        within = sum(1 for g, _ in part if abs(g) <= STEP_GOAL_PCT)
        return (f"within {STEP_GOAL_PCT:g} % at {within} of {len(part)} points "
                f"({min(g for g, _ in part):+.1f} … {max(g for g, _ in part):+.1f} %)")

    parts = []
    if fits:
        parts.append(span(fits) + ("" if cores is None else f" with a core per rank (≤ {cores} ranks)"))
    if shared:
        replayed = all(replayed_on_shared_cores(r) for _, r in shared)
        parts.append(span(shared) + f" where ranks share the {cores} cores"
                     + (" (replayed on those cores)" if replayed else ""))
    return "Measured step against the replay's makespan: " + "; ".join(parts) + "."


def measured_overview(rows: list[dict], source: str, reference: list[dict] | None = None,
                      reference_source: str = "") -> list[str]:
    """Where the measured records come from, over all schedules; their errors."""
    runs = run_rows(rows)
    if not runs:
        return []
    ok = [r for r in runs if r.get("status", "ok") == "ok"]
    gaps = [g for g, _ in bubble_gaps(ok)]
    out = [f"From `{source}` ({len(runs)} points: {status_counts(runs)}), one thread per rank "
           "(one process per rank where a title says mpirun); each paper's section has the "
           "points of its schedules.", ""]
    out += machine_lines(ok or runs)
    if gaps:
        out.append(f"- measured − predicted bubble_fraction over all ok runs: "
                   f"{min(gaps):+.1f} … {max(gaps):+.1f} percentage points")
    steps = step_time_sentence(ok)
    if steps:
        out.append("- " + steps[0].lower() + steps[1:])
    ref_runs = run_rows(reference or [])
    if ref_runs:
        ref_ok = [r for r in ref_runs if r.get("status", "ok") == "ok"] or ref_runs
        out.append(f"- beside them, the reference `{reference_source}` ({len(ref_runs)} points): "
                   f"{who_made(ref_ok)}")
    out.append("")
    invalid = [r for r in runs if r.get("status") not in (None, "ok")]
    messages = sorted({str(r.get("error", "")) for r in invalid if r.get("status") == "error"})
    if messages:
        out += ["Errors:", ""] + [f"- {m}" for m in messages] + [""]
    return out


def measured_tables(rows: list[dict], simulated_rows: list[dict], sort_key: SortKey,
                    reference: list[dict] | None = None, reference_source: str = "",
                    source: str = "") -> list[str]:
    """The measured points of some schedules, one table per workload: theory, simulation and
    measurement side by side, the machine and commit of the measurement, then what differs."""
    ok = [r for r in run_rows(rows) if r.get("status", "ok") == "ok"]
    if not ok:
        return []
    simulated = theory_index(simulated_rows)
    ref_runs = run_rows(reference or [])
    ref_index = {point_id(r): r for r in ref_runs} if ref_runs else None
    out = [(f"Source: ppbench's own runs (`{source}`), beside the theory and the simulation. "
            if source else "")
           + "Columns: *theory*: the closed form's bubble for uniform stages with the costs "
           f"`closed_form_cost` names (F=1, B=2; {DASH} where the schedule has none); "
           "*simulation, uniform*: ppbench's simulation of the same schedule, D and N at those "
           f"costs from the simulated records ({DASH} where they have no such point); "
           "*simulation, measured costs*: the simulator replaying the same step's measured "
           "per-op costs (`predicted.bubble_fraction`); *measurement*: the bubble_fraction of "
           "the run's measured trace (`measured.bubble_fraction`); *gap* = measurement − "
           "simulation with measured costs, in percentage points; samples/s and the step time "
           "(`step_time_s`) over the measured steps; peak activation MiB is the max over ranks, "
           "measured by the per-rank arena / predicted by the activation model."
           + (" *ref. measurement*, *ref. samples/s*: the same point in the reference records "
              f"({DASH} where the reference has no ok row of it)." if ref_index is not None
              else "")
           + " No paper column: the papers give no bubble figures for these small workloads. "
             "Points a schedule does not allow are left out.", "",
           f"Measurement column: {who_made(ok)}."]
    if ref_index is not None:
        ref_ok = [r for r in ref_runs if r.get("status", "ok") == "ok"] or ref_runs
        out.append(f"Reference columns: `{reference_source}`, {who_made(ref_ok)}.")
    out.append("")
    by_workload: dict[str, list[dict]] = defaultdict(list)
    for r in ok:
        by_workload[workload_title(r)].append(r)
    extra_head = " ref. measurement | ref. samples/s |" if ref_index is not None else ""
    extra_rule = "---|---|" if ref_index is not None else ""
    for title in sorted(by_workload):
        group = sorted(by_workload[title], key=lambda r: (
            int(field(r, "devices")), sort_key(series_label(r)), int(field(r, "microbatches"))))
        out += [f"#### {title}", "",
                "| schedule | D | N | theory | simulation, uniform | simulation, measured costs "
                "| measurement | gap (pp) | samples/s | step (ms) | peak act. MiB measured / "
                "model |" + extra_head,
                "|---|---|---|---|---|---|---|---|---|---|---|" + extra_rule]
        out += [measured_line(r, simulated, ref_index) for r in group] + [""]
    return out + measured_differences(ok, simulated)


def measured_differences(ok: list[dict], simulated: dict[tuple, dict]) -> list[str]:
    gaps = bubble_gaps(ok)
    if not gaps:
        return []
    worst_gap, worst = max(gaps, key=lambda g: abs(g[0]))
    mean = sum(abs(g) for g, _ in gaps) / len(gaps)
    cores = machine_cores(ok)
    over = [r for r in ok if cores and ranks_of(r) > cores]
    text = (f"**What differs and why.** Measurement − simulation with measured costs: "
            f"{min(g for g, _ in gaps):+.1f} … {max(g for g, _ in gaps):+.1f} percentage points "
            f"over {len(gaps)} points (mean |gap| {mean:.1f}), the largest {worst_gap:+.1f} at "
            f"{series_label(worst)} D = {field(worst, 'devices')}, N = "
            f"{field(worst, 'microbatches')} ({workload_title(worst).split(',')[0]}). The replay "
            "uses the step's own per-op times, so what remains is what the simulator leaves "
            "out: hand-overs between rank threads, their wake-ups and a machine shared with "
            "other work")
    if over and all(replayed_on_shared_cores(r) for r in over):
        text += (f"; {len(over)} of these points run more ranks than the machine's {cores} "
                 "cores. Their replay shares the cores too (each op costs its thread's CPU time, "
                 "and an action waits for a free core, first ready first served), so what "
                 "remains there is how the operating system schedules the threads (a woken rank "
                 "may wait, or preempt one on the critical path); their measured busy time also "
                 "holds the slices other ranks ran in mid-action, so their bubble gap overstates "
                 "the difference and the step times below say it better")
    elif over:
        text += (f"; {len(over)} of these points run more ranks than the machine's "
                 f"{cores} cores, so their ranks also wait for a core")
    text += "."
    steps = step_time_sentence(ok)
    if steps:
        text += " " + steps
    pairs = [(float(r["measured"]["bubble_fraction"]),
              float(simulated[theory_key(r, uniform_cost(r))]["bubble_fraction"]))
             for r in ok if theory_key(r, uniform_cost(r)) in simulated
             and measured_bubble(r) is not None]
    if pairs:
        diff = [100 * (m - u) for m, u in pairs]
        text += (f" Measurement − simulation with uniform costs: {min(diff):+.1f} … "
                 f"{max(diff):+.1f} points over {len(pairs)} points: real layers are not the "
                 "equal F=1, B=2 stages the theory assumes.")
    return [text, ""]


# --- latest against the reference ------------------------------------------------------------

SIMULATED_KEYS = ("makespan", "bubble_fraction", "peak_activations")


def same_number(a: Any, b: Any, tol: float = 1e-9) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(a)), abs(float(b)))
    return a == b


def reference_section(rows: list[dict], source: str, reference: list[dict] | None,
                      reference_source: str, measured: list[dict] | None,
                      measured_source: str, reference_measured: list[dict] | None,
                      reference_measured_source: str) -> list[str]:
    if not reference and not reference_measured:
        return []
    out = ["The reference records are the committed ones (`results/reference/`); they never "
           "stand in for a run: a sweep resumes only from records of the same machine and the "
           "same ppbench build (docs/bench.md).", ""]
    if reference:
        out += [f"- latest simulated: `{source}`, {who_made(rows)}",
                f"- reference simulated: `{reference_source}`, {who_made(reference)}"]
        ref = {point_id(r): r for r in reference}
        common = [(r, ref[point_id(r)]) for r in latest_rows(rows, key=point_id)
                  if point_id(r) in ref]
        differ = []
        for r, q in common:
            if r.get("status", "ok") != q.get("status", "ok"):
                differ.append((r, f"status {q.get('status', 'ok')} → {r.get('status', 'ok')}"))
                continue
            for k in SIMULATED_KEYS:
                if r.get("status", "ok") == "ok" and not same_number(r.get(k), q.get(k)):
                    differ.append((r, f"{k} {fmt(q.get(k))} → {fmt(r.get(k))}"))
                    break
        out.append(f"- simulated points in both: {len(common)}; the same status, makespan, "
                   f"bubble_fraction and peak activations (to 1e-9): {len(common) - len(differ)}"
                   + (f"; different: {len(differ)}" if differ else ""))
        for r, what in differ[:10]:
            out.append(f"  - {series_label(r)} D={field(r, 'devices')} "
                       f"N={field(r, 'microbatches')}, costs {cost_of(r) or 'default'}: {what}")
        if len(differ) > 10:
            out.append(f"  - … and {len(differ) - 10} more")
        out.append("")
    runs = run_rows(measured or [])
    ref_runs = run_rows(reference_measured or [])
    if ref_runs:
        ok = [r for r in runs if r.get("status", "ok") == "ok"]
        ref_ok = [r for r in ref_runs if r.get("status", "ok") == "ok"]
        out += [f"- latest measured: `{measured_source or 'none'}`"
                + (f", {who_made(ok or runs)}" if runs else " (no measured records)"),
                f"- reference measured: `{reference_measured_source}`, {who_made(ref_ok or ref_runs)}"]
        ref = {point_id(r): r for r in ref_ok}
        ratios = sorted(samples_per_s(r) / samples_per_s(ref[point_id(r)]) for r in ok
                        if point_id(r) in ref and samples_per_s(r) and
                        samples_per_s(ref[point_id(r)]))
        if ratios:
            median = ratios[len(ratios) // 2] if len(ratios) % 2 else \
                (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
            out.append(f"- samples/s latest ÷ reference over the {len(ratios)} points ok in both: "
                       f"median {median:.3g}×, range {ratios[0]:.3g}× … {ratios[-1]:.3g}× "
                       "(each paper's measured runs have them point by point)")
        else:
            out.append("- no point is ok in both, so no throughput is compared")
        out.append("")
    return out


def zb_table5_section(table: dict | None, source: str) -> list[str]:
    """The Zero Bubble paper's Table 5, as scripts/zb_table5.py recorded it."""
    if not table:
        return []
    columns = table["columns"]
    out = [f"Source: {table['source']}; from `{source}` (`scripts/zb_table5.py`). Each cell is "
           f"ppbench's simulated rate, the paper's in parentheses; {table['definition']}. No "
           "theory column: the record holds no closed form (ZB-1p and ZB-2p come from a search "
           "over the costs, which has none; the others' formulas, which leave out the hand-over "
           "time these costs include, are in this section's bubble tables). No measurement column: "
           "the paper measured on GPUs at these model sizes, and ppbench has no run of them.", "",
           "| Model | p | m | F / B / W / comm | " + " | ".join(columns) + " |",
           "|" + "---|" * (4 + len(columns))]
    for r in table["rows"]:
        c = r["costs"]
        # Four decimals, as the paper prints its rates.
        cells = [f"{r['ppbench'][k]:.4f} ({r['paper'][k]:.4f})" for k in columns]
        out.append(f"| {r['model']} | {r['p']} | {r['m']} | {c['F']} / {c['B']} / {c['W']} / "
                   f"{c['comm']} | " + " | ".join(cells) + " |")
    # Equal to the paper's four decimals, or not, per column.
    differ = {k: [r for r in table["rows"] if f"{r['ppbench'][k]:.4f}" != f"{r['paper'][k]:.4f}"]
              for k in columns}
    same = [k for k in columns if not differ[k]]
    notes = []
    for k, rows in differ.items():
        if rows:
            gaps = [r["ppbench"][k] - r["paper"][k] for r in rows]
            notes.append(f" {k}: {len(rows)} of {len(table['rows'])} rows differ, ppbench "
                         f"{min(gaps):+.4f} … {max(gaps):+.4f} from the paper.")
    out += ["", f"**What differs and why.** Equal to the paper's figure to four decimals in every "
            f"row: {', '.join(same) or 'none'}." + "".join(notes)
            + (" docs/papers.md (\"Zero Bubble's Table 5\") says how the paper's runs may "
               "place the chunks otherwise than ppbench does." if notes else ""), ""]
    return out


def dp_scaling_section(table: dict | None, source: str) -> list[str]:
    """Data x pipeline parallelism on paper, as scripts/dp_scaling.py recorded it."""
    if not table:
        return []
    a = table["assumptions"]
    rates = a["device_rates"]
    return [f"Source: ppbench's own prediction, from `{source}` (`scripts/dp_scaling.py`): "
            f"{table['label']}. {a['workload']}; "
            f"{a['schedule']}. Device: `{a['device_profile']}`, peak {rates['peak_flops']:.4g} "
            f"FLOP/s and {rates['memory_bandwidth']:.4g} B/s (datasheet figures used as a "
            f"roofline: an optimistic bound), pipeline hand-overs at "
            f"{rates['link_bandwidth']:.4g} B/s + {rates['link_latency']:.4g} s. Between "
            f"replicas: {a['inter_node_link']}; all-reduce {a['allreduce']}. Bubble is one "
            "replica's, which is the whole job's as the replicas are identical. No paper and no "
            "measurement column: no paper's table is reproduced here, and no multi-node GPU run "
            "has been made yet.", "",
            table["markdown"].rstrip(), "", "**What differs and why.** " + table["summary"], ""]


def gpipe_cell(x: Any) -> str:
    return DASH if x is None else f"{x:.2f}"


def gpipe_machine(p: dict) -> str:
    return (f"{p.get('host', '?')} ({p.get('cpu', '?')}, {p.get('cpu_cores', '?')} cores), "
            f"commit {str(p.get('git_commit', '?'))[:12]}")


def gpipe_measured_by(table: dict) -> str:
    """The machine and commit of gpipe_tables.json's measurements, and the load it ran under."""
    data = table["data"]
    loads = [p["load_average_before"][0] for p in data["profiles"].values()] + \
        [r["load_average_before"][0] for rs in data["runs"].values() for r in rs] + \
        [r["load_average_before"][0] for r in data["scaling_runs"]]
    return (f"{gpipe_machine(table['machine'])}; 1-minute load average {min(loads):.1f} to "
            f"{max(loads):.1f} at the start of the measurements (the machine was shared)")


def gpipe_tables_section(table: dict | None, source: str) -> list[str]:
    """GPipe's Tables 2 and 3, as scripts/gpipe_tables.py recorded them."""
    if not table:
        return []
    out = [f"Source: {table['source']}, Tables 2 and 3; from `{source}` "
           f"(`scripts/gpipe_tables.py`). Normalised throughput: {table['definition']}. "
           "*paper*: the paper's figure (Table 2: TPU v3; Table 3: P100). *simulation*: `ppbench "
           "simulate --schedule gpipe` of the full shape, each layer's F and B measured once on "
           "the CPU below at micro-batch 1 (the full shapes are too slow to time at the paper's "
           "batch sizes there), stages the balanced partition of F + B, no hand-over time. "
           f"*theory* is {DASH}: the paper states no closed form for throughput (its bubble "
           "formula is in this section's bubble tables). *measurement* is "
           f"{DASH}: ppbench has no run of the full shapes (no GPU run yet); real runs of "
           "smaller shapes of the same models follow the two tables.", "",
           f"Layer costs measured on {gpipe_measured_by(table)}.", ""]
    cells: list[tuple[str, str, Any, Any]] = []  # (table, where, paper, simulation)
    out += ["**Table 2** (TPU v3):", "",
            "| model | M | K | paper | theory | simulation | measurement |",
            "|---|---|---|---|---|---|---|"]
    for t in table["table2"]:
        for r in t["rows"]:
            for k, c in r["cells"].items():
                out.append(f"| {t['model']} | {r['M']} | {k} | {gpipe_cell(c['paper'])} | "
                           f"{DASH} | {gpipe_cell(c['predicted'])} | {DASH} |")
                cells.append(("Table 2", f"{t['model']}, M = {r['M']}, K = {k}", c["paper"],
                              c["predicted"]))
    out += ["", "**Table 3** (P100, M = 32):", "",
            "| model | K | paper | theory | simulation | measurement |",
            "|---|---|---|---|---|---|"]
    for t in table["table3"]:
        for k, c in t["cells"].items():
            out.append(f"| {t['model']} | {k} | {gpipe_cell(c['paper'])} | {DASH} | "
                       f"{gpipe_cell(c['predicted'])} | {DASH} |")
            cells.append(("Table 3", f"{t['model']}, K = {k}", c["paper"], c["predicted"]))
    out += ["", "**Real CPU runs at K = 2** (smaller shapes of the same models; micro-batch 1; "
            "normalised to their own M = 1 run). *CUDA*: the same shape at K = 2 on one GPU "
            "split into virtual devices of a fixed size (`scripts/gpu_tables.py`, normalised to "
            f"its own M = 1 run; {DASH} where none). The measurement column: "
            f"{gpipe_machine(table['machine'])}. " + gpipe_cuda_note(table), "",
            "| model (smaller shape) | of | M | paper (K=2) | theory | simulation | measurement "
            "| CUDA |",
            "|---|---|---|---|---|---|---|---|"]
    for s in table["small"]:
        paper = {r["M"]: r["cells"]["2"]["paper"] for t in table["table2"]
                 if t["model"] == s["of"] for r in t["rows"]}
        for r in s["rows"]:
            out.append(f"| {s['model']} | {s['of']} | {r['M']} | {gpipe_cell(paper.get(r['M']))} "
                       f"| {DASH} | {gpipe_cell(r['predicted'])} | {gpipe_cell(r['measured'])} | "
                       f"{gpipe_cell(r['cuda'])} |")
    out += [""] + gpipe_gpu_grid(table) + gpipe_differences(cells, table)
    return out


def gpipe_gpu_machine(gpu: dict) -> str:
    m = gpu["machine"]
    return (f"{m.get('gpu', '?')} split into devices of {gpu['sms_per_device']} SMs, commit "
            f"{str(m.get('git_commit') or '?')[:12]}, {m.get('date') or '?'} "
            f"({', '.join(f'`{x}`' for x in gpu['source'])})")


def gpipe_cuda_note(table: dict) -> str:
    """Where the CUDA column's numbers come from."""
    if not table.get("gpu"):
        return "The CUDA column is empty: no GPU run of these shapes yet."
    return f"The CUDA column: {gpipe_gpu_machine(table['gpu'])}."


def gpipe_gpu_grid(table: dict) -> list[str]:
    """Table 2's K x M grid measured on fixed-size virtual devices of one GPU, where the
    `tables` part of gpu-check ran: each added device adds SMs, as each TPU core does."""
    gpu = table.get("gpu")
    if not gpu or not gpu["grids"]:
        return []
    out = ["**Real GPU runs at K = 2, 4, 8** (the smaller shapes; K virtual devices of "
           f"{gpu['sms_per_device']} SMs each, so K devices have K times the SMs; normalised to "
           f"the shape's own K = 2, M = 1 run; the paper's figure beside each): "
           f"{gpipe_gpu_machine(gpu)}.", "",
           "| model (smaller shape) | of | M | " + " | ".join(
               f"paper (K={k}) | GPU (K={k})" for k in ("2", "4", "8")) + " |",
           "|---|---|---|" + "---|---|" * 3]
    for grid in gpu["grids"]:
        paper = {r["M"]: r["cells"] for t in table["table2"] if t["model"] == grid["of"]
                 for r in t["rows"]}
        for r in grid["rows"]:
            cells = " | ".join(f"{gpipe_cell(paper.get(r['M'], {}).get(k, {}).get('paper'))} | "
                               f"{gpipe_cell(r['cells'].get(k))}" for k in ("2", "4", "8"))
            out.append(f"| {grid['model']} | {grid['of']} | {r['M']} | {cells} |")
    return out + [""]


def gpipe_differences(cells: list[tuple[str, str, Any, Any]], table: dict) -> list[str]:
    both = [(t, where, p, q) for t, where, p, q in cells if p is not None and q is not None]
    text = "**What differs and why.** "
    for name in ("Table 2", "Table 3"):
        rows = [c for c in both if c[0] == name]
        if rows:
            worst = max(rows, key=lambda c: abs(c[3] - c[2]))
            text += (f"{name}: simulation − paper from {min(q - p for _, _, p, q in rows):+.2f} "
                     f"to {max(q - p for _, _, p, q in rows):+.2f} over {len(rows)} cells, the "
                     f"largest at {worst[1]} ({gpipe_cell(worst[3])} against "
                     f"{gpipe_cell(worst[2])}). ")
    small = [r for s in table["small"] for r in s["rows"]
             if r.get("measured") is not None and r.get("predicted") is not None]
    if small:
        gaps = [r["measured"] - r["predicted"] for r in small]
        text += (f"Smaller shapes: measurement − simulation from {min(gaps):+.2f} to "
                 f"{max(gaps):+.2f}. ")
    return [(text + table.get("discussion", "")).strip(), ""]


def gpipe_scaling_section(table: dict | None, source: str) -> list[str]:
    """1F1B's throughput against pipeline devices, from scripts/gpipe_tables.py's record."""
    if not table or not table.get("scaling"):
        return []
    sc = table["scaling"]
    m, p = sc["measured"], sc["predicted"]
    out = [f"Source: ppbench's own runs, from `{source}` (`scripts/gpipe_tables.py`); the "
           "throughput-scaling figure GPipe and the 1F1B papers draw, for 1F1B: "
           f"{sc['model']}, N = {sc['microbatches']} micro-batches of {sc['microbatch_size']}, "
           "fixed global batch, samples/s. *ideal* is D × the D = 1 figure. No paper and no "
           "theory column: the papers give no figure for this small shape, and the closed form "
           "gives a bubble, not a throughput.", "",
           f"Measurement column: {gpipe_measured_by(table)}.", "",
           "| D | measurement | ideal (D x measured D=1) | simulation | ideal (D x simulated "
           "D=1) |",
           "|---|---|---|---|---|"]
    mt = dict(zip(m["devices"], zip(m["throughput"], m["ideal"])))
    for d, tp, ideal in zip(p["devices"], p["throughput"], p["ideal"]):
        mm = mt.get(d)
        out.append(f"| {d} | {gpipe_cell(mm[0]) if mm else DASH} | "
                   f"{gpipe_cell(mm[1]) if mm else DASH} | {tp:.2f} | {ideal:.2f} |")
    gpu = (table.get("gpu") or {}).get("scaling")
    if gpu:
        out += ["", f"The same on one GPU: {gpipe_gpu_machine(table['gpu'])}.", "",
                "| D | GPU measurement | ideal (D x GPU D=1) |", "|---|---|---|"]
        out += [f"| {d} | {tp:.2f} | {ideal:.2f} |"
                for d, tp, ideal in zip(gpu["devices"], gpu["throughput"], gpu["ideal"])]
    cores = table["machine"].get("cpu_cores")
    efficiency = [f"D = {d}: measured {tp / ideal:.2f}" for d, (tp, ideal) in sorted(mt.items())
                  if ideal]
    simulated = [f"D = {d}: {tp / ideal:.2f}" for d, tp, ideal in
                 zip(p["devices"], p["throughput"], p["ideal"]) if ideal]
    missing = [d for d in p["devices"] if d not in mt]
    if gpu:
        simulated.append("on the GPU " + ", ".join(
            f"D = {d}: {tp / ideal:.2f}" for d, tp, ideal in
            zip(gpu["devices"], gpu["throughput"], gpu["ideal"]) if ideal))
    out += ["", "**What differs and why.** Throughput ÷ ideal, "
            + ", ".join(efficiency) + "; simulated " + ", ".join(simulated) + ". Below 1 is the "
            "pipeline bubble and, measured, the hand-overs between ranks."
            + (f" No measurement at D = {', '.join(str(d) for d in missing)}: the CPU has "
               f"{cores} cores, and more ranks than cores would share them." if missing else ""),
            ""]
    return out


# --- output ----------------------------------------------------------------------------------

class Figures:
    """The figures the report shows: the first of `dirs` that holds a file wins; links are
    relative to the report's folder, so report_html can embed them."""

    def __init__(self, dirs: list[Path] | None = None, out_dir: Path | None = None):
        self.dirs = list(dirs or [])
        self.out_dir = out_dir or Path(".")

    def find(self, name: str) -> Path | None:
        return next((d / name for d in self.dirs if (d / name).is_file()), None)

    def names(self, pattern: str) -> list[str]:
        return sorted({p.name for d in self.dirs if d.is_dir() for p in d.glob(pattern)})

    def lines(self, name: str, caption: str) -> list[str]:
        path = self.find(name)
        if path is None:
            return []
        link = os.path.relpath(path.resolve(), self.out_dir.resolve()).replace(os.sep, "/")
        return [f"![{caption}]({link})", "", f"*{caption}* (`{path.as_posix()}`)", ""]

    def many(self, items: list[tuple[str, str]]) -> list[str]:
        return [line for name, caption in items for line in self.lines(name, caption)]


def cost_of_figure(name: str) -> str:
    """plot_bubble.py's file name back to the costs: bubble_F1_I1_W1.png -> F=1,I=1,W=1."""
    stem = name[len("bubble_"):-len(".png")]
    return ",".join(re.sub(r"^([A-Za-z]+)", r"\1=", part) for part in stem.split("_"))


def timelines(figures: Figures, schedules: list[str]) -> list[str]:
    """The simulated and measured timelines `make plots` draws for these schedules."""
    items = []
    for name in schedules:
        items.append((f"timeline_{name}.png", f"{name}: simulated timeline, D = 4, N = 8"))
        items.append((f"timeline_measured_{name}.png",
                      f"{name}: measured timeline of a real CPU step (transformer, D = 4, N = 8)"))
    return figures.many(items)


def build_report(rows: list[dict], source: str, pp: int = 8, cost: str = DEFAULT_COST,
                 dualpipe_n: tuple[int, ...] = (16, 32), measured: list[dict] | None = None,
                 measured_source: str = "", registry: list[dict] | None = None,
                 reference: list[dict] | None = None, reference_source: str = "",
                 reference_measured: list[dict] | None = None,
                 reference_measured_source: str = "", zb_table5: dict | None = None,
                 zb_table5_source: str = "", dp_scaling: dict | None = None,
                 dp_scaling_source: str = "", gpipe_tables: dict | None = None,
                 gpipe_tables_source: str = "",
                 dualpipe_measured: dict | None = None,
                 dualpipe_measured_source: str = "", figures: Figures | None = None) -> str:
    costs_present = {cost_of(r) for r in rows}
    if cost not in costs_present and costs_present:
        cost = max(costs_present, key=lambda c: sum(cost_of(r) == c for r in rows))
    figures = figures or Figures()
    measured = measured or []
    sort_key = order_key(schedule_order(registry, list(rows) + list(measured)))
    present = sorted({str(field(r, "schedule")) for r in list(rows) + run_rows(measured)},
                     key=sort_key)
    sections = []
    for paper in PAPERS:
        section = Section(f"{paper.title}")
        section.intro = [f"Source: {paper.citation}.", ""]
        mine = [s for s in present if s in paper.schedules]
        # The paper's own tables first, then the bubble tables of its schedules.
        if paper is GPIPE:
            section.add("Tables 2 and 3: normalised throughput",
                        gpipe_tables_section(gpipe_tables, gpipe_tables_source))
        elif paper is ZERO_BUBBLE:
            section.add("Table 5: bubble rates from the profiled costs",
                        zb_table5_section(zb_table5, zb_table5_source))
        elif paper is DUALPIPE:
            section.add("Table 2: bubble, parameters and activations",
                        dualpipe_table(rows, pp, cost, list(dualpipe_n)))
            section.add("Table 2 measured on this machine",
                        measured_dualpipe_section(dualpipe_measured, dualpipe_measured_source))
        elif paper is LECTURES:
            section.add("Activation memory of the worked example", activation_table(rows, cost))
            section.add("Memory of an 8B model", figures.lines(
                "memory_8b_pp_seq.png", "the Llama-3-8B-shaped model under 1F1B: the most "
                "loaded rank's memory against D and sequence length, with one 80 GB GPU marked"))
        elif paper is DATA_PIPELINE:
            section.intro = []
            section.add("Two replicas of an 8-stage pipeline, predicted",
                        dp_scaling_section(dp_scaling, dp_scaling_source))
        add_schedule_tables(section, mine, rows, source, measured, sort_key, reference_measured,
                            reference_measured_source, measured_source)
        if paper is ONE_F_ONE_B:
            section.add("Throughput against pipeline devices",
                        gpipe_scaling_section(gpipe_tables, gpipe_tables_source)
                        + figures.lines("gpipe_1f1b_scaling.png",
                                        "1F1B throughput against pipeline devices"))
            section.add("Memory", figures.many([
                ("memory_transformer_D4_N8.png", "per-rank peak activation memory, measured "
                 "beside modelled, transformer, D = 4, N = 8 (1F1B's rank r keeps D − r "
                 "micro-batches; other schedules beside it)"),
                ("memory_per_rank_d4.png", "every rank's modelled memory of the "
                 "Llama-3-8B-shaped model at sequence 4096, D = 4, N = 8, per schedule")]))
        if mine:
            section.add("Timelines", timelines(figures, mine))
        sections.append(section)
    others = [s for s in present if paper_of(s) is None]
    other = Section("Other schedules", ["Schedules of the records that reproduce no paper above.",
                                        ""])
    add_schedule_tables(other, others, rows, source, measured, sort_key, reference_measured,
                        reference_measured_source, measured_source)
    sections.append(other)
    together = Section("All schedules together")
    together.add("Bubble fraction against micro-batches", figures.many(
        [(name, f"bubble fraction against N, simulated (markers) and closed form (lines), "
                f"costs {cost_of_figure(name)}")
         for name in figures.names("bubble_*.png") if name != "bubble_measured_vs_predicted.png"]))
    together.add("Measured records", measured_overview(
        measured, measured_source, reference_measured, reference_measured_source)
        + figures.lines("bubble_measured_vs_predicted.png", "measured bubble_fraction against "
                        "the simulator's replay of the same step's measured costs"))
    sections.append(together)
    latest = Section("Latest against the reference")
    latest.add("Which records agree", reference_section(
        rows, source, reference, reference_source, measured, measured_source,
        reference_measured, reference_measured_source))
    sections.append(latest)
    contents, body = render(sections)
    lines = header(rows, source, reference, reference_source, registry is not None)
    return "\n".join(lines + contents + body).rstrip() + "\n"


def add_schedule_tables(section: Section, schedules: list[str], rows: list[dict], source: str,
                        measured: list[dict], sort_key: SortKey,
                        reference_measured: list[dict] | None,
                        reference_measured_source: str, measured_source: str) -> None:
    """A paper's bubble tables (theory and simulation) and its measured points."""
    if not schedules:
        return
    want = set(schedules)
    mine = [r for r in rows if field(r, "schedule") in want]
    runs = [r for r in run_rows(measured) if field(r, "schedule") in want]
    ok_runs = [r for r in runs if r.get("status", "ok") == "ok"]
    note = ("The measurement is in the next subsection." if ok_runs else
            "No measured run of these schedules is in the records given (no CPU or GPU run "
            "yet), so there is no measurement column.")
    section.add("Bubble fraction: theory and simulation",
                bubble_tables(mine, sort_key, note, source))
    section.add("Bubble fraction: theory, simulation and measurement", measured_tables(
        runs, rows, sort_key, [r for r in run_rows(reference_measured or [])
                               if field(r, "schedule") in want] or None,
        reference_measured_source, measured_source))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Write the markdown report (bubble tables, DualPipe comparison, activation "
                    "memory, measured runs, latest against the reference) from sweep results.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="JSON Lines from scripts/sweep.py")
    parser.add_argument("--out", type=Path, default=Path("results/latest/REPORT.md"),
                        help="report path (default: %(default)s)")
    parser.add_argument("--pp", type=int, default=8,
                        help="pipeline stages PP of the DualPipe comparison (default: %(default)s)")
    parser.add_argument("--dualpipe-n", default="16,32",
                        help="micro-batch counts of the DualPipe comparison (default: %(default)s)")
    parser.add_argument("--measured", type=Path,
                        help="JSON Lines of `ppbench run` sweep rows (e.g. results/latest/cpu.jsonl): "
                             "adds the measured section")
    parser.add_argument("--reference", type=Path,
                        help="the committed simulated records to compare with (e.g. "
                             "results/reference/theory.jsonl)")
    parser.add_argument("--reference-measured", type=Path,
                        help="the committed measured records to set beside --measured (e.g. "
                             "results/reference/cpu.jsonl)")
    parser.add_argument("--ppbench",
                        help="ppbench binary: schedule order and names from `ppbench list "
                             "--format json` (default: the order in the data)")
    parser.add_argument("--zb-table5", type=Path,
                        help="the Zero Bubble Table 5 reproduction (results/reference/"
                             "zb_table5.json, from scripts/zb_table5.py): adds it to the Zero "
                             "Bubble section")
    parser.add_argument("--dp-scaling", type=Path,
                        help="the data x pipeline predictions (results/reference/dp_scaling.json, "
                             "from scripts/dp_scaling.py): adds the data x pipeline section")
    parser.add_argument("--gpipe-tables", type=Path,
                        help="GPipe's Tables 2 and 3 reproduced (results/reference/"
                             "gpipe_tables.json, from scripts/gpipe_tables.py): adds them to the "
                             "GPipe section, and 1F1B's throughput against devices to the 1F1B one")
    parser.add_argument("--dualpipe-measured", type=Path,
                        help="the DualPipe comparison measured on this machine (results/reference/"
                             "dualpipe_measured.json, from scripts/dualpipe_measured.py): adds "
                             "its subsection to the DualPipe section")
    parser.add_argument("--figures", type=Path, action="append", default=[],
                        help="a folder of the figures to show (e.g. plots/reference); repeat it: "
                             "the first that holds a figure wins")
    parser.add_argument("--html", type=Path,
                        help="also write the report as one self-contained HTML page (figures "
                             "inline as data: URIs), e.g. results/latest/REPORT.html")
    parser.add_argument("--cost", default=DEFAULT_COST,
                        help="cost setting of sections 2 and 3 (default: %(default)s)")
    return parser.parse_args(argv)


def read_optional(path: Path | None) -> list[dict] | None:
    return None if path is None else load_records(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        rows = load_records(args.results)
        measured = read_optional(args.measured) or []
        reference = read_optional(args.reference)
        reference_measured = read_optional(args.reference_measured)
        zb_table5 = json.loads(args.zb_table5.read_text(encoding="utf-8")) \
            if args.zb_table5 else None
        dp_scaling = json.loads(args.dp_scaling.read_text(encoding="utf-8")) \
            if args.dp_scaling else None
        gpipe_tables = json.loads(args.gpipe_tables.read_text(encoding="utf-8")) \
            if args.gpipe_tables else None
        dualpipe_measured = json.loads(args.dualpipe_measured.read_text(encoding="utf-8")) \
            if args.dualpipe_measured else None
    except (OSError, ValueError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    if not rows:
        print(f"report: no rows in {args.results}", file=sys.stderr)
        return 1
    try:
        registry = schedule_registry(args.ppbench)
    except PpbenchError as e:
        print(f"report: {e}", file=sys.stderr)
        return e.code
    ns = tuple(int(n) for n in args.dualpipe_n.split(","))
    text = build_report(
        rows, str(args.results), args.pp, args.cost, ns, measured, str(args.measured or ""),
        registry, reference, str(args.reference or ""), reference_measured,
        str(args.reference_measured or ""), zb_table5, str(args.zb_table5 or ""), dp_scaling,
        str(args.dp_scaling or ""), gpipe_tables, str(args.gpipe_tables or ""),
        dualpipe_measured, str(args.dualpipe_measured or ""),
        Figures(args.figures, args.out.parent))
    atomic_write(args.out, text)
    print(f"wrote {args.out}")
    if args.html:
        atomic_write(args.html, markdown_to_html(text, args.out.parent, "ppbench results"))
        print(f"wrote {args.html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
