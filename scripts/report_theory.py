"""The report's sections from the simulated records alone: the bubble tables (ppbench's
simulation beside the registry's closed form), DualPipe's Table 2 and the lectures'
activation-memory example.

No formula is written or evaluated here: formulas and their values come from the records'
"closed_form" fields (ppbench's registry).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from report_format import DASH, DEFAULT_COST, SortKey, cell, comm_of, cost_of, costs_title, \
    field, fmt, fraction, same_number, series_label


# --- bubble tables ---------------------------------------------------------------------------

def bubble_cell(row: dict | None) -> str:
    if row is None:
        return ""
    status = row.get("status", "ok")
    if status != "ok":
        return "invalid" if status == "invalid" else "error"
    closed = (row.get("closed_form") or {}).get("bubble_fraction")
    return f"{fraction(row.get('bubble_fraction'))} ({fraction(closed)})"


def bubble_tables(rows: list[dict], sort_key: SortKey, measured_note: str = "",
                  source: str = "") -> list[str]:
    """Simulated bubble beside the closed form, one table per (costs, comm, D), then what
    differs: points that differ only in their hand-over time are not one cell."""
    by_cost: dict[tuple[str, float], list[dict]] = defaultdict(list)
    for r in rows:
        by_cost[(cost_of(r), comm_of(r))].append(r)
    costs = sorted(by_cost, key=lambda c: (c[0] != DEFAULT_COST, c))
    tables: list[str] = []
    for cost, comm in costs:
        for d, table in sorted(bubble_tables_for(by_cost[(cost, comm)], sort_key).items()):
            tables += [f"#### D = {d}, {costs_title(cost, comm)}", ""] + table + [""]
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
                 f"{field(worst, 'devices')}, N = {field(worst, 'microbatches')}, "
                 f"{costs_title(cost_of(worst), comm_of(worst))})")
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
    """D -> markdown table lines; only series with at least two N values (a sweep over N). The
    rows are of one cost setting (costs and comm): a point is a cell of its own."""
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


def at_costs(rows: list[dict], cost: str, comm: float) -> list[dict]:
    """The rows of one cost setting: costs and hand-over time (comm_of)."""
    return [r for r in rows if cost_of(r) == cost and comm_of(r) == comm]


def find_row(rows: Iterable[dict], **want: Any) -> dict | None:
    """The row with the fields `want` (the ok one where several), of rows of one cost setting
    (at_costs): across settings the same point is several rows."""
    found = None
    for r in rows:
        if all(field(r, k) == v for k, v in want.items()):
            if found is None or r.get("status") == "ok":
                found = r
    return found


def dualpipe_table(rows: list[dict], pp: int, cost: str, ns: list[int],
                   comm: float = 0.0) -> list[str]:
    candidates = at_costs(rows, cost, comm)
    compared: list[dict] = []
    out = [f"Source: the DualPipe paper's table (DeepSeek-V3 report, Table 2) at PP = {pp} "
           f"stages, {costs_title(cost, comm)} (DualPipeV runs the PP stages on PP/2 devices). "
           "The paper's "
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


# --- the lectures' activation-memory example -------------------------------------------------

# The textbook worked example (pipeline-parallelism lectures draw D = 4 GPUs, N = 8 micro-batches),
# quoted as stated, not evaluated here: (label, schedule, per-GPU activation in units of A as
# written, and its value).
TEXTBOOK_ACTIVATIONS = [
    ("naive model parallel", "naive", "1/4·A = 0.25·A", 0.25),
    ("GPipe", "gpipe", "8/4·A = 2.00·A", 2.0),
    ("1F1B", "1f1b", "4/4·A = 1.00·A", 1.0),
]


def activation_table(rows: list[dict], cost: str, devices: int = 4, n: int = 8,
                     comm: float = 0.0) -> list[str]:
    candidates = at_costs(rows, cost, comm) or rows
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
