"""The report's sections on measured records (`ppbench run` rows): the overview of where they
come from, each paper's table of theory, simulation and measurement side by side, and what
differs between them and why.
"""

from __future__ import annotations

import json
from collections import defaultdict

from report_format import DASH, DEFAULT_COST, SortKey, comm_of, cost_of, date_range, field, fmt, \
    fraction, placement_title, provenance_values, series_label, status_counts, who_made


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


def theory_key(row: dict, cost: str, comm: float) -> tuple:
    return (series_label(row), int(field(row, "devices")), int(field(row, "microbatches")), cost,
            comm)


def theory_index(rows: list[dict]) -> dict[tuple, dict]:
    """The ok simulated records by (series, D, N, costs, comm): the uniform-cost simulation of a
    measured point; a point simulated at several hand-over times is several entries."""
    return {theory_key(r, cost_of(r), comm_of(r)): r for r in rows
            if r.get("status", "ok") == "ok"}


def uniform_key(row: dict) -> tuple:
    """The theory_index key of a run's uniform-cost simulation: the costs its closed form was
    evaluated for (`closed_form_cost`), with no hand-over time, as the closed form assumes."""
    return theory_key(row, str(row.get("closed_form_cost") or DEFAULT_COST), 0.0)


def measured_line(row: dict, simulated: dict[tuple, dict],
                  reference: dict[str, dict] | None = None) -> str:
    measured = measured_bubble(row)
    predicted = (row.get("predicted") or {}).get("bubble_fraction")
    gap = None if measured is None or predicted is None else 100 * (measured - predicted)
    closed = (row.get("closed_form") or {}).get("bubble_fraction")
    uniform = simulated.get(uniform_key(row), {}).get("bubble_fraction")
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
    # Its own table: the same point in threads or on another backend is another measurement.
    placement = placement_title(row)
    if placement:
        parts.append(placement)
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


def cores_of(row: dict) -> int | None:
    """The cores of the machine that ran the row, from its own provenance (None where it does
    not say): records of several machines are each held to their own."""
    cores = (row.get("provenance") or {}).get("cpu_cores")
    return cores if isinstance(cores, int) and not isinstance(cores, bool) and cores > 0 \
        else None


def shares_cores(row: dict) -> bool:
    """Whether the run's ranks outnumbered its machine's cores."""
    cores = cores_of(row)
    return cores is not None and ranks_of(row) > cores


def cores_said(rows: list[dict]) -> tuple[str, bool]:
    """The core counts of the rows' machines ("2", or "2 or 8") and whether there are several."""
    counts = sorted({c for c in map(cores_of, rows) if c is not None})
    return " or ".join(str(c) for c in counts), len(counts) > 1


# The goal for CPU runs: the measured step within this many percent of the replay's.
STEP_GOAL_PCT = 5.0


def replayed_on_shared_cores(row: dict) -> bool:
    """Whether the run's replay shared the cores among its ranks as its threads did (ppbench
    records the cores in `predicted.cores` where its rank threads outnumbered them)."""
    return isinstance((row.get("predicted") or {}).get("cores"), int)


def their_cores(cores: str, several: bool, owner: str = "the") -> str:
    """"the 2 cores" ("the machine's 2 cores" with that owner), or, for points of machines
    with different core counts, "their machine's 2 or 8 cores"."""
    return f"their machine's {cores} cores" if several else f"{owner} {cores} cores"


def step_time_sentence(ok: list[dict]) -> str:
    """How the measured steps land against the replay's makespans, the points that have a core
    per rank apart from those that share cores (whose ranks also wait for one)."""
    gaps = makespan_gaps(ok)
    if not gaps:
        return ""
    fits = [(g, r) for g, r in gaps if not shares_cores(r)]
    shared = [(g, r) for g, r in gaps if shares_cores(r)]

    def span(part: list[tuple[float, dict]]) -> str:
        within = sum(1 for g, _ in part if abs(g) <= STEP_GOAL_PCT)
        return (f"within {STEP_GOAL_PCT:g} % at {within} of {len(part)} points "
                f"({min(g for g, _ in part):+.1f} … {max(g for g, _ in part):+.1f} %)")

    parts = []
    if fits:
        cores, several = cores_said([r for _, r in fits])
        parts.append(span(fits) + (f" with a core per rank (≤ {cores} ranks"
                                   + (", by machine)" if several else ")") if cores else ""))
    if shared:
        cores, several = cores_said([r for _, r in shared])
        replayed = all(replayed_on_shared_cores(r) for _, r in shared)
        parts.append(span(shared) + f" where ranks share {their_cores(cores, several)}"
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
    over = [r for r in ok if shares_cores(r)]
    machine_cores = their_cores(*cores_said(over), "the machine's")
    text = (f"**What differs and why.** Measurement − simulation with measured costs: "
            f"{min(g for g, _ in gaps):+.1f} … {max(g for g, _ in gaps):+.1f} percentage points "
            f"over {len(gaps)} points (mean |gap| {mean:.1f}), the largest {worst_gap:+.1f} at "
            f"{series_label(worst)} D = {field(worst, 'devices')}, N = "
            f"{field(worst, 'microbatches')} ({workload_title(worst).split(',')[0]}). The replay "
            "uses the step's own per-op times, so what remains is what the simulator leaves "
            "out: hand-overs between rank threads, their wake-ups and a machine shared with "
            "other work")
    if over and all(replayed_on_shared_cores(r) for r in over):
        text += (f"; {len(over)} of these points run more ranks than {machine_cores}. Their "
                 "replay shares the cores too (each op costs its thread's CPU time, "
                 "and an action waits for a free core, first ready first served), so what "
                 "remains there is how the operating system schedules the threads (a woken rank "
                 "may wait, or preempt one on the critical path); their measured busy time also "
                 "holds the slices other ranks ran in mid-action, so their bubble gap overstates "
                 "the difference and the step times below say it better")
    elif over:
        text += (f"; {len(over)} of these points run more ranks than {machine_cores}, so "
                 "their ranks also wait for a core")
    text += "."
    steps = step_time_sentence(ok)
    if steps:
        text += " " + steps
    pairs = [(float(r["measured"]["bubble_fraction"]),
              float(simulated[uniform_key(r)]["bubble_fraction"]))
             for r in ok if uniform_key(r) in simulated and measured_bubble(r) is not None]
    if pairs:
        diff = [100 * (m - u) for m, u in pairs]
        text += (f" Measurement − simulation with uniform costs: {min(diff):+.1f} … "
                 f"{max(diff):+.1f} points over {len(pairs)} points: real layers are not the "
                 "equal F=1, B=2 stages the theory assumes.")
    return [text, ""]
