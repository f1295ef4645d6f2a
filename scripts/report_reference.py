"""The report's last section: the latest records against the committed reference ones, point by
point (simulated values to 1e-9, measured throughput as a ratio).
"""

from __future__ import annotations

from report_format import cost_of, field, fmt, same_number, series_label, who_made
from report_measured import point_id, run_rows, samples_per_s
from results_io import latest_rows


# --- latest against the reference ------------------------------------------------------------

SIMULATED_KEYS = ("makespan", "bubble_fraction", "peak_activations")


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
                f"- reference measured: `{reference_measured_source}`, "
                f"{who_made(ref_ok or ref_runs)}"]
        ref = {point_id(r): r for r in ref_ok}
        out += throughput_ratios([(r, ref[point_id(r)]) for r in ok if point_id(r) in ref])
        out.append("")
    return out


def throughput_ratios(pairs: list[tuple[dict, dict]]) -> list[str]:
    """The samples/s of (latest, reference) points ok in both, as ratios; a point without a
    positive throughput on either side has no ratio, and the line says how many were left out."""
    ratios = sorted(samples_per_s(r) / samples_per_s(q) for r, q in pairs
                    if (samples_per_s(r) or 0) > 0 and (samples_per_s(q) or 0) > 0)
    if not pairs:
        return ["- no point is ok in both, so no throughput is compared"]
    left_out = len(pairs) - len(ratios)
    over = f"the {len(ratios)} points ok in both" if not left_out else \
        f"{len(ratios)} of the {len(pairs)} points ok in both ({left_out} left out: their " \
        "samples/s is 0 or missing on one side)"
    if not ratios:
        return [f"- samples/s latest ÷ reference: no ratio over {over}"]
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    return [f"- samples/s latest ÷ reference over {over}: median {median:.3g}×, range "
            f"{ratios[0]:.3g}× … {ratios[-1]:.3g}× (each paper's measured runs have them point "
            "by point)"]
