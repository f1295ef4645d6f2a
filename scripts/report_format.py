"""The report's shared vocabulary: a record's parameters and series label, number and table-cell
formatting, and who made a set of records (commit, machine, dates from their provenance).

Every other report_*.py module writes its cells and provenance lines with these, so a number or
a machine reads the same in every section of the report (scripts/report.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Callable

from script_cli import InputError, json_kind

DEFAULT_COST = "F=1,B=2"
DASH = "—"
# Sort key of a series label; build_report sets it from the registry (or the data) first.
SortKey = Callable[[str], tuple[int, str]]


# --- a record's parameters -------------------------------------------------------------------


def field(row: dict, key: str, default: Any = None) -> Any:
    """A parameter of a row: top level (ok rows) or the requested point (failed rows)."""
    if row.get(key) is not None:
        return row[key]
    return (row.get("point") or {}).get(key, default)


# What the report and the plots read of a record, by kind: a record of another shape is the
# input's fault, named as such by check_records before any table is walked.
WHOLE_FIELDS = ("devices", "microbatches", "chunks", "group_size", "replicas", "stages")
POSITIVE_FIELDS = ("devices", "microbatches")
# (object, key) of the finite numbers the report and the plots read ("": the record itself).
NUMBER_FIELDS = [(part, key) for part in ("", "closed_form", "measured", "predicted")
                 for key in ("bubble_fraction", "makespan")] + \
    [("", "step_time_s"), ("", "comm"), ("point", "comm"), ("throughput", "samples_per_s")]
OBJECT_FIELDS = ("point", "closed_form", "measured", "predicted", "throughput", "fidelity",
                 "provenance", "gpu")


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_records(rows: list[dict], where: str) -> list[dict]:
    """The rows, once each has a schedule, D and N (at its top level or in its point) and the
    fields the report and the plots read are of their kind (whole numbers, finite numbers,
    objects, a list of per-rank objects) where present; else InputError naming `where`, the
    field and its value, instead of a traceback deep in a table."""
    for row in rows:
        name = row.get("schedule", (row.get("point") or {}).get("schedule")
                       if isinstance(row.get("point"), dict) else None)

        def bad(key: str, value: Any, wanted: str) -> InputError:
            return InputError(f"{where}: a record{f' of {name}' if name else ''} has {key} "
                              f"{value!r} ({json_kind(type(value))}), not {wanted}")

        for key in OBJECT_FIELDS:
            if row.get(key) is not None and not isinstance(row[key], dict):
                raise bad(key, row[key], "an object")
        for part in ("row", "point"):
            record = row if part == "row" else row.get("point") or {}
            for key in WHOLE_FIELDS:
                value = record.get(key)
                if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                    raise bad(key if part == "row" else f"point.{key}", value, "a whole number")
                # No pipeline has no device or no micro-batch: the plots put N on a log axis
                # and the tables divide by both.
                if key in POSITIVE_FIELDS and value is not None and value < 1:
                    raise bad(key if part == "row" else f"point.{key}", value,
                              "a whole number >= 1")
        for key in ("schedule", "devices", "microbatches"):
            if field(row, key) is None:
                raise InputError(f"{where}: a record{f' of {name}' if name else ''} has no "
                                 f"{key}")
        for part, key in NUMBER_FIELDS:
            value = ((row.get(part) or {}) if part else row).get(key)
            if value is not None and not is_number(value):
                raise bad(f"{part}.{key}" if part else key, value, "a finite number")
        per_rank = row.get("activation_bytes")
        if per_rank is not None:
            if not isinstance(per_rank, list):
                raise bad("activation_bytes", per_rank, "a list of per-rank objects")
            for entry in per_rank:
                if not isinstance(entry, dict):
                    raise bad("activation_bytes[]", entry, "an object")
                for key, value in entry.items():
                    if key in ("rank", "measured_peak_bytes", "model_peak_bytes") and \
                            value is not None and not is_number(value):
                        raise bad(f"activation_bytes[].{key}", value, "a finite number")
    return rows


def cost_of(row: dict) -> str:
    """The cost string the point asked for ('' = ppbench's default)."""
    return str(field(row, "cost", "") or "")


def comm_of(row: dict) -> float:
    """The hand-over time the point asked for (the sweep's `comm`; 0 where the record has
    none): a second cost axis, so points that differ only in it are different points."""
    value = field(row, "comm")
    return float(value) if value is not None else 0.0


def costs_title(cost: str, comm: float = 0.0) -> str:
    """How the report names a cost setting: "costs F=1,B=2", with ", comm 0.5" where the
    hand-over time is not 0."""
    return f"costs {cost or 'default'}" + (f", comm {comm:g}" if comm else "")


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


def placement_title(row: dict) -> str:
    """Where a run's ranks ran, where it is not threads on the CPU backend: "cuda, 4 virtual
    devices on one GPU", "8 processes under mpirun (2 replicas)"; "" for the default. The same
    point placed otherwise is another measurement, so tables and figures keep them apart."""
    parts = []
    backend = field(row, "backend")
    if backend not in (None, "cpu"):
        parts.append(str(backend))
    devices = int(field(row, "devices") or 0)
    if field(row, "virtual_devices"):
        parts.append(f"{devices} virtual devices on one GPU")
    if field(row, "gpus"):
        parts.append(f"{devices} GPUs, one per rank")
    if field(row, "launcher") == "mpirun":
        replicas = int(field(row, "replicas") or 1)
        parts.append(f"{devices * replicas} processes under mpirun"
                     + (f" ({replicas} replicas)" if replicas > 1 else ""))
    return ", ".join(parts)


def fmt(x: Any) -> str:
    """A count or a time in cost units: 21, 0.5, 6.333."""
    if x is None:
        return DASH
    return f"{x:.4g}" if isinstance(x, (int, float)) else str(x)


# --- provenance ------------------------------------------------------------------------------

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


# --- cells and numbers -----------------------------------------------------------------------

def cell(text: Any) -> str:
    """Text for a markdown table cell (pipes escaped)."""
    return DASH if text in (None, "") else str(text).replace("|", "\\|")


def fraction(x: Any) -> str:
    return DASH if x is None else f"{float(x):.4f}"


def same_number(a: Any, b: Any, tol: float = 1e-9) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(a)), abs(float(b)))
    return a == b
