"""The report's sections from the JSON files the reproduction scripts record: GPipe's Tables 2
and 3 and 1F1B's throughput against devices (scripts/gpipe_tables.py), Zero Bubble's Table 5
(scripts/zb_table5.py), the data x pipeline predictions (scripts/dp_scaling.py) and DualPipe's
Table 2 measured on this machine (scripts/dualpipe_measured.py).
"""

from __future__ import annotations

from typing import Any

from report_format import DASH, cell


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
            f"{ms_range(b['measured_idle_per_rank_s'])} "
            f"(max {b['measured_idle_max_in_F']:.2f} F) | "
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
           "*count*; the paper's value in parentheses). A point with more ranks than cores is "
           "oversubscribed: its threads "
           "share cores, so its busy times include waiting for one.", ""]
    for comp in table["comparisons"]:
        rows = comp["rows"]
        out += [f"#### {comp['title']}", "",
                "| Method | schedule | PP | Bubble: measured idle per rank (ms) | Bubble: paper's "
                "formula, measured costs (ms) | Bubble: replay (ms) | Parameter vs 1F1B "
                "(paper) | Activation peak, stage units (paper) |",
                "|---|---|---|---|---|---|---|---|"]
        out += [measured_dualpipe_row(r) for r in rows]
        out += ["", "The measured costs (means over the stages of the per-stage medians, "
                "median over "
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


# --- Zero Bubble's Table 5, data x pipeline, GPipe's Tables 2 and 3 ---------------------------

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
           # The paper's B is the input gradient alone: ppbench's I, not its full backward B.
           "| Model | p | m | F / B (ppbench's I) / W / comm, ms | " + " | ".join(columns) + " |",
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


def gpipe_predicted_by(table: dict) -> str:
    """The sentence naming the build that simulated, where the table says (older ones do not)."""
    commit = (table.get("predicted_by") or {}).get("git_commit")
    return f" Simulated by ppbench at commit {str(commit)[:12]}." if commit else ""


def gpipe_profiles_told(data: dict) -> str:
    """How each layer's F and B were taken: once, or the median of repeated profiles."""
    repeats = sorted({p.get("repeats", 1) for p in data["profiles"].values()})
    if repeats == [1]:
        return "measured once"
    span = str(repeats[0]) if len(repeats) == 1 else f"{repeats[0]} to {repeats[-1]}"
    return f"the median of {span} profiles (each one step after a warm-up step)"


def gpipe_runs_told(data: dict) -> str:
    """How a real run's point was taken: one run's mean step, or the median of several runs'
    measured steps."""
    runs = [r for rs in data["runs"].values() for r in rs] + data["scaling_runs"]
    if not runs or any("repeats" not in r for r in runs):
        return "each point one run's mean step time"
    shapes = sorted({(r["repeats"], len(r["step_times_s"][0])) for r in runs})
    return "each point the median of " + ", ".join(
        f"{n * k} measured steps ({n} runs of {k}, in rounds over the points)" for n, k in shapes)


def gpipe_tables_section(table: dict | None, source: str) -> list[str]:
    """GPipe's Tables 2 and 3, as scripts/gpipe_tables.py recorded them."""
    if not table:
        return []
    out = [f"Source: {table['source']}, Tables 2 and 3; from `{source}` "
           f"(`scripts/gpipe_tables.py`). Normalised throughput: {table['definition']}. "
           "*paper*: the paper's figure (Table 2: TPU v3; Table 3: P100). *simulation*: `ppbench "
           "simulate --schedule gpipe` of the full shape, each layer's F and B "
           f"{gpipe_profiles_told(table['data'])} on the CPU below at micro-batch 1 (the full "
           "shapes are too slow to time at the paper's batch sizes there), stages the balanced "
           "partition of F + B, no hand-over time, each stage's optimizer step (AdamW, `run`'s "
           "default) where the profiles timed one. "
           f"*theory* is {DASH}: the paper states no closed form for throughput (its bubble "
           "formula is in this section's bubble tables). *measurement* is "
           f"{DASH}: ppbench has no run of the full shapes (no GPU run yet); real runs of "
           "smaller shapes of the same models follow the two tables.", "",
           f"Layer costs measured on {gpipe_measured_by(table)}.{gpipe_predicted_by(table)}",
           ""]
    cells: list[tuple[str, str, Any, Any]] = []  # (table, where, paper, simulation)
    out += ["**Table 2** (TPU v3; each cell ÷ the model's K = 2, M = 1 cell):", "",
            "| model | M | K | paper | theory | simulation | measurement |",
            "|---|---|---|---|---|---|---|"]
    for t in table["table2"]:
        for r in t["rows"]:
            for k, c in r["cells"].items():
                out.append(f"| {t['model']} | {r['M']} | {k} | {gpipe_cell(c['paper'])} | "
                           f"{DASH} | {gpipe_cell(c['predicted'])} | {DASH} |")
                cells.append(("Table 2", f"{t['model']}, M = {r['M']}, K = {k}", c["paper"],
                              c["predicted"]))
    out += ["", "**Table 3** (P100, M = 32; each cell ÷ the model's K = 2 cell):", "",
            "| model | K | paper | theory | simulation | measurement |",
            "|---|---|---|---|---|---|"]
    for t in table["table3"]:
        for k, c in t["cells"].items():
            out.append(f"| {t['model']} | {k} | {gpipe_cell(c['paper'])} | {DASH} | "
                       f"{gpipe_cell(c['predicted'])} | {DASH} |")
            cells.append(("Table 3", f"{t['model']}, K = {k}", c["paper"], c["predicted"]))
    out += ["", "**Real CPU runs at K = 2** (smaller shapes of the same models; micro-batch 1; "
            f"normalised to their own M = 1 run; {gpipe_runs_told(table['data'])}). *CUDA*: the "
            "same shape at K = 2 on one GPU "
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
    """Where the CUDA column's numbers come from, and the GPU sessions left out."""
    if not table.get("gpu"):
        return "The CUDA column is empty: no GPU run of these shapes yet."
    return f"The CUDA column: {gpipe_gpu_machine(table['gpu'])}." + \
        gpipe_gpu_not_used(table["gpu"])


def gpipe_gpu_not_used(gpu: dict) -> str:
    """The other GPU sessions found: named, not used (their cells ran on other SMs, builds or
    machines, so they are not normalised against the session used)."""
    others = gpu.get("not_used") or []
    if not others:
        return ""
    return (" Not used, as cells of different sessions are not normalised against each other: "
            + "; ".join(f"`{o['source']}` ({o['gpu']}, {o['sms_per_device']} SMs per device, "
                        f"{o.get('date') or 'undated'}, {o['points']} points)" for o in others)
            + ".")


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
           f"Measurement column: {gpipe_measured_by(table)}; "
           f"{gpipe_runs_told(table['data'])}.", "",
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
