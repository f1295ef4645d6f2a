"""PREFIX.jsonl and PREFIX.csv: the rows a sweep records, and which of them stand.

Records holds the rows of this sweep's ppbench and machine (identity_of their recorded_by), one
per point (row_key, the last line of a point stands), and sets the others aside at the end of
PREFIX.previous.jsonl. PREFIX.csv follows every append: simulate rows in CSV_COLUMNS, run rows
in RUN_CSV_COLUMNS, in PREFIX.csv when no simulate row is there, else in PREFIX-run.csv (which
is removed when there are not both kinds, so that the CSVs hold the JSONL's points).
describe is a row's outcome on the sweep's progress line.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any, Iterable

from results_io import (append_jsonl, append_new_lines, append_text, atomic_write, loads_finite,
                        parses_with_nan, rewrite_jsonl)
from script_cli import json_strings, read_text, shown, surrogate
from sweep_point import RUN_KEYS, SPEC_KEYS, Point, format_number, make_point

# What makes a recorded row stand for this sweep's run of the same point (sweep.py: Resume).
# gpu_stack: the CUDA runtime, the driver's CUDA version and cuBLASLt the GPU points ran on,
# which the binary's sha256 does not cover (the bundle's launcher takes the target's cuBLAS).
IDENTITY_FIELDS = ("git_commit", "host", "cpu", "cpu_cores", "gpu", "gpu_stack", "ppbench_sha256")

# The statuses of a row that a sweep does not run again (unless --force) nor let an error replace.
STANDING = ("ok", "invalid")

CSV_COLUMNS = (
    "schedule", "devices", "microbatches", "chunks", "group_size", "cost", "comm", "status",
    "makespan", "bubble_fraction", "bubble_ratio", "zb_bubble_rate", "peak_activations",
    "peak_activation_share", "closed_form_bubble_fraction", "closed_form_idle_per_rank",
    "git_commit", "date",
)

# The requested point's columns of a run row, then its results.
RUN_POINT_COLUMNS = (
    "workload", "workload_flags", "schedule", "devices", "microbatches", "chunks", "group_size",
    "microbatch_size", "dtype", "steps", "warmup", "seed", "recompute", "backend",
    "virtual_devices", "gpus", "launcher", "replicas",
)
RUN_CSV_COLUMNS = RUN_POINT_COLUMNS + (
    "status", "error",
    "params", "step_time_s", "samples_per_s", "tokens_per_s", "measured_makespan",
    "measured_bubble_fraction", "predicted_bubble_fraction", "bubble_gap",
    "measured_zb_bubble_rate", "closed_form_bubble_fraction", "loss", "grad_norm",
    "max_measured_peak_bytes", "max_model_peak_bytes", "gpu", "placement", "sms_per_rank",
    "partitions_as_requested", "transport", "cpu", "cpu_cores", "host", "git_commit", "date",
)


def identity_of(recorded_by: Any) -> tuple | None:
    """The fields that make a record this build's on this machine, as a key; a field that is a
    list or an object (a record another tool or hand wrote) stands as its JSON text, so that the
    key stays hashable and still tells the record apart."""
    if not isinstance(recorded_by, dict):
        return None
    return tuple(v if v is None or isinstance(v, (str, int, float)) else
                 json.dumps(v, sort_keys=True, default=str)
                 for v in (recorded_by.get(k) for k in IDENTITY_FIELDS))


def machine_text(rb: dict) -> str:
    """host vm, CPU AMD EPYC (2 cores), no GPU."""
    cores = f" ({rb['cpu_cores']} cores)" if rb.get("cpu_cores") else ""
    gpu = f"GPU {rb['gpu']}" if rb.get("gpu") else "no GPU visible to ppbench"
    return f"host {rb.get('host') or 'unknown'}, CPU {rb.get('cpu') or 'unknown'}{cores}, {gpu}"


def who_text(rb: dict) -> str:
    sha = str(rb.get("ppbench_sha256") or "")[:12]
    return (f"ppbench at commit {rb.get('git_commit') or 'unknown'}"
            + (f" (binary sha256 {sha}…)" if sha else "") + f" on {machine_text(rb)}")


# Every file a sweep writes for --out PREFIX (PREFIX-run.csv: run rows beside simulate rows,
# see write_csv; .jsonl.lock: sweep.prefix_lock), named by prefix_file; sweep.py checks each
# before any work, so that a folder in the way is a bad --out (exit 2), not a failure at the end.
OUTPUT_SUFFIXES = (".jsonl", ".csv", "-run.csv", ".summary.json", ".previous.jsonl",
                   ".jsonl.lock")


def prefix_file(prefix: Path, suffix: str) -> Path:
    """PREFIX with suffix appended to its name (PREFIX.jsonl): one of OUTPUT_SUFFIXES."""
    return prefix.with_name(prefix.name + suffix)


# The JSON values a point's key may take (None: the key left out).
SCALARS = (str, int, float, bool, type(None))


def row_key(row: dict) -> tuple | None:
    """The key of a recorded row: its requested point, as written by this script."""
    point = row.get("point")
    if not isinstance(point, dict):
        point = row  # a row written by another tool: use its top-level fields
    keys = RUN_KEYS if point.get("command") == "run" else SPEC_KEYS
    # A list or object where a value belongs is a damaged or foreign line: make_point would
    # hash it (TypeError: unhashable type), so it is set aside like an unreadable line.
    if not all(isinstance(point.get(k), SCALARS) for k in keys + ("command",)):
        return None
    try:
        return make_point(**{k: point.get(k) for k in keys}).key()
    except (TypeError, ValueError, OverflowError):  # OverflowError: "devices": 1e999
        return None


def unwritable_text(row: dict) -> str | None:
    """The first lone UTF-16 surrogate ("\\ud800" in the JSON) of the row's point or its CSV
    cells, or None: UTF-8 cannot write it, so PREFIX.csv could not be written with it."""
    cells = run_csv_row(row) if is_run_row(row) else csv_row(row)
    for _, text in json_strings([part(row, "point"), list(cells.values())]):
        bad = surrogate(text)
        if bad is not None:
            return bad
    return None


class Records:
    """PREFIX.jsonl: the rows of this sweep's ppbench and machine, one per point (the last
    line of a point stands), and what the file held from others (set aside at settle())."""

    def __init__(self, prefix: Path, recorded_by: dict):
        self.path = prefix_file(prefix, ".jsonl")
        self.csv_path = prefix_file(prefix, ".csv")
        self.previous_path = prefix_file(prefix, ".previous.jsonl")
        self.identity = identity_of(recorded_by)
        self.rows: dict[tuple, dict] = {}
        self.others: list[str] = []         # raw lines of other machines / builds / unreadable
        self.other_by: dict[tuple, dict] = {}
        self.unattributed = 0
        self.lines = 0
        if self.path.exists():
            for n, line in enumerate(read_text(self.path, "records").splitlines(), 1):
                if not line.strip():
                    continue
                self.lines += 1
                why = None
                try:
                    # Strict JSON: a NaN kept here would reach the CSV as nan and make
                    # report.py refuse the file, and could not be written back (allow_nan=False).
                    row = loads_finite(line)
                    key = row_key(row) if isinstance(row, dict) else None
                except (ValueError, RecursionError) as e:  # RecursionError: nested too deep
                    why = e if isinstance(e, ValueError) and parses_with_nan(line) else "not JSON"
                else:
                    bad = unwritable_text(row) if key is not None else None
                    if bad is not None:
                        why = f"a lone UTF-16 surrogate ({shown(bad)}), which no CSV can hold"
                if why is not None:
                    print(shown(f"warning: {self.path}:{n}: {why}, set aside"), file=sys.stderr)
                    key, row = None, None
                if key is not None and identity_of(row.get("recorded_by")) == self.identity:
                    self.rows[key] = row  # a later line of the point replaces it in place
                else:
                    self.others.append(line)
                    if isinstance(row, dict) and isinstance(row.get("recorded_by"), dict):
                        self.other_by.setdefault(identity_of(row["recorded_by"]),
                                                 row["recorded_by"])
                    else:
                        self.unattributed += 1

    def settle(self) -> str | None:
        """Move other rows to the end of PREFIX.previous.jsonl, compact PREFIX.jsonl, write
        PREFIX.csv; returns a line saying what was set aside (None when nothing was).

        previous.jsonl is only appended to (under its lock, lines it holds already left out): what
        an earlier sweep set aside stays there, and the records are in one of the two files at
        every moment, since PREFIX.jsonl loses them only after the append."""
        message = None
        if self.others:
            append_new_lines(self.previous_path, self.others)
            whose = [who_text(rb) for rb in list(self.other_by.values())[:2]]
            if len(self.other_by) > 2:
                whose.append("…")
            if self.unattributed:
                whose.append(f"{self.unattributed} without recorded_by, e.g. copies of the "
                             "committed reference records")
            message = (f"set aside {len(self.others)} records of another machine or ppbench "
                       f"build ({'; '.join(whose)}) in {self.previous_path}: they do not stand "
                       "for this run")
        if self.lines != len(self.rows) or not self.path.exists():
            rewrite_jsonl(self.path, self.rows.values())  # created empty when new, like the CSV
            self.lines = len(self.rows)
        self.write_csv()
        return message

    def status(self, point: Point) -> str | None:
        """The status of the point's standing row: "ok", "invalid", "error", or None."""
        row = self.rows.get(point.key())
        return None if row is None else row.get("status")

    def put(self, point: Point, row: dict) -> bool:
        """Append the row (one locked write), then bring PREFIX.csv in step: a new point whose
        kind the CSV already holds is appended as one row; anything else (a point run again,
        the first row of a kind) rewrites the CSV atomically.

        An error row never takes the place of a measured one: when the point holds an ok or
        invalid row (a --force re-run that crashed or timed out), the error row goes to the end
        of PREFIX.previous.jsonl and the recorded row stands. Returns whether the row stands."""
        key = point.key()
        held = self.rows.get(key)
        if row.get("status") == "error" and held is not None and held.get("status") in STANDING:
            append_jsonl(self.previous_path, row)
            return False
        append_jsonl(self.path, row)
        self.lines += 1
        before = csv_layout(self.rows.values())
        new = key not in self.rows
        self.rows[key] = row
        if new and before == csv_layout(self.rows.values()) and self.csv_path.exists():
            path, columns, make_row = csv_target(self.csv_path, before, is_run_row(row))
            append_text(path, csv_text(columns, make_row, [row], header=False))
        else:
            self.write_csv()
        return True

    def compact(self) -> None:
        if self.lines != len(self.rows):
            rewrite_jsonl(self.path, self.rows.values())
            self.lines = len(self.rows)

    def write_csv(self) -> list[Path]:
        return write_csv(self.csv_path, self.rows.values())


def part(row: dict, key: str) -> dict:
    """row[key] where it is an object, else {}: a record written by hand or by another tool
    may hold anything there, and its CSV cells are then empty rather than the sweep stopped."""
    value = row.get(key)
    return value if isinstance(value, dict) else {}


def listed(value: Any) -> list:
    """value where it is a list, else [] (as part() does for objects)."""
    return value if isinstance(value, list) else []


def csv_row(row: dict) -> dict[str, Any]:
    point = part(row, "point")
    closed = part(row, "closed_form")
    out: dict[str, Any] = {}
    for k in SPEC_KEYS:
        value = row.get(k, point.get(k))
        out[k] = "" if value is None else value
    # Only a number is formatted: a top-level "comm" from another tool may be anything (a bool
    # is an int to Python, but not a cost), and is then written as it is.
    comm = out["comm"]
    if isinstance(comm, (int, float)) and not isinstance(comm, bool):
        out["comm"] = format_number(comm)
    for k in ("status", "makespan", "bubble_fraction", "bubble_ratio", "zb_bubble_rate",
              "peak_activations", "peak_activation_share"):
        out[k] = row.get(k, "")
    out["closed_form_bubble_fraction"] = closed.get("bubble_fraction")
    out["closed_form_idle_per_rank"] = closed.get("idle_per_rank")
    out.update(provenance_columns(row, ("git_commit", "date")))
    return {k: ("" if v is None else v) for k, v in out.items()}


def provenance_columns(row: dict, keys: tuple[str, ...]) -> dict[str, Any]:
    """The row's provenance fields; where it has none (an error or invalid row: ppbench gave no
    record), what the sweep knows: recorded_by (the ppbench and machine that ran the point) and
    the row's own date."""
    prov = part(row, "provenance")
    by = part(row, "recorded_by")
    out = {}
    for k in keys:
        value = prov.get(k)
        if value is None:
            value = row.get(k) if k == "date" else by.get(k)
        out[k] = value
    return out


def is_run_row(row: dict) -> bool:
    point = part(row, "point")
    return (point.get("command") or row.get("command")) == "run"


def numbers(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def run_csv_row(row: dict) -> dict[str, Any]:
    point = part(row, "point")
    measured = part(row, "measured")
    predicted = part(row, "predicted")
    throughput = part(row, "throughput")
    closed = part(row, "closed_form")
    act = [a for a in listed(row.get("activation_bytes")) if isinstance(a, dict)]
    out: dict[str, Any] = {}
    for k in RUN_POINT_COLUMNS:
        value = point.get(k, row.get(k))
        out[k] = "" if value is None else value
    out["status"] = row.get("status", "")
    out["error"] = row.get("error", "")
    out["params"] = row.get("params")
    out["step_time_s"] = row.get("step_time_s")
    out["samples_per_s"] = throughput.get("samples_per_s")
    out["tokens_per_s"] = throughput.get("tokens_per_s")
    out["measured_makespan"] = measured.get("makespan")
    out["measured_bubble_fraction"] = measured.get("bubble_fraction")
    out["predicted_bubble_fraction"] = predicted.get("bubble_fraction")
    gap = part(row, "fidelity").get("bubble_fraction_gap")
    measured_bf, predicted_bf = out["measured_bubble_fraction"], out["predicted_bubble_fraction"]
    if gap is None and len(numbers((measured_bf, predicted_bf))) == 2:
        gap = measured_bf - predicted_bf
    out["bubble_gap"] = gap
    out["measured_zb_bubble_rate"] = measured.get("zb_bubble_rate")
    out["closed_form_bubble_fraction"] = closed.get("bubble_fraction")
    out["loss"] = row.get("loss")
    out["grad_norm"] = row.get("grad_norm")
    measured_bytes = numbers(a.get("measured_peak_bytes") for a in act)
    model_bytes = numbers(a.get("model_peak_bytes") for a in act)
    out["max_measured_peak_bytes"] = max(measured_bytes) if measured_bytes else None
    out["max_model_peak_bytes"] = max(model_bytes) if model_bytes else None
    out.update(gpu_columns(row))
    out.update(provenance_columns(row, ("cpu", "cpu_cores", "host", "git_commit", "date")))
    return {k: ("" if v is None else v) for k, v in out.items()}


def gpu_columns(row: dict) -> dict[str, Any]:
    """What a GPU run record says about where it ran ("gpu" in ppbench's JSON); empty on CPU."""
    gpu = part(row, "gpu")
    names = [n for n in listed(gpu.get("gpu_names")) if isinstance(n, str)]
    sms = [str(n) for n in listed(gpu.get("sms_per_rank"))]
    partitions = part(gpu, "partitions")
    granted = partitions.get("as_requested")
    return {"gpu": ", ".join(dict.fromkeys(names)), "placement": gpu.get("placement"),
            "sms_per_rank": "/".join(sms), "transport": gpu.get("transport"),
            "partitions_as_requested": "" if granted is None else str(bool(granted)).lower()}


def partition_text(row: dict) -> str:
    """The ranks' SM partitions of a GPU run record: 4x32 SMs, or 64/32 SMs; "" otherwise."""
    sms = (row.get("gpu") or {}).get("sms_per_rank") if isinstance(row.get("gpu"), dict) else None
    if not sms:
        return ""
    if len(set(sms)) == 1:
        return f"{len(sms)}x{sms[0]} SMs"
    return "/".join(str(n) for n in sms) + " SMs"


def csv_text(columns: tuple[str, ...], make_row, rows: Iterable[dict],
             header: bool = True) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow(make_row(row))
    return buf.getvalue()


def csv_layout(rows: Iterable[dict]) -> tuple[bool, bool]:
    """(any run rows, any simulate rows): which CSV files hold which rows (write_csv)."""
    kinds = {is_run_row(r) for r in rows}
    return (True in kinds, False in kinds)


def csv_target(path: Path, layout: tuple[bool, bool], run: bool):
    """The file, columns and row maker a row of that kind goes to under a layout."""
    if not run:
        return path, CSV_COLUMNS, csv_row
    if layout[1]:  # simulate rows too: the run rows have PREFIX-run.csv
        return path.with_name(path.stem + "-run" + path.suffix), RUN_CSV_COLUMNS, run_csv_row
    return path, RUN_CSV_COLUMNS, run_csv_row


def write_csv(path: Path, rows: Iterable[dict]) -> list[Path]:
    """PREFIX.csv from the rows (see the module doc for where run rows go); the paths written."""
    rows = list(rows)
    runs = [r for r in rows if is_run_row(r)]
    sims = [r for r in rows if not is_run_row(r)]
    run_path = path.with_name(path.stem + "-run" + path.suffix)
    if runs and sims:
        atomic_write(path, csv_text(CSV_COLUMNS, csv_row, sims))
        atomic_write(run_path, csv_text(RUN_CSV_COLUMNS, run_csv_row, runs))
        return [path, run_path]
    if runs:
        atomic_write(path, csv_text(RUN_CSV_COLUMNS, run_csv_row, runs))
    else:
        atomic_write(path, csv_text(CSV_COLUMNS, csv_row, sims))
    # An earlier sweep's PREFIX-run.csv would still list run points the JSONL no longer holds
    # (set aside, or moved into PREFIX.csv). It is made from the JSONL, so nothing is lost; a
    # prefix that ends in -run has that file as its own CSV and keeps it.
    if not run_path.with_suffix(".jsonl").exists():
        run_path.unlink(missing_ok=True)
    return [path]


def describe(row: dict) -> str:
    if row["status"] == "ok" and is_run_row(row):
        measured = (row.get("measured") or {}).get("bubble_fraction")
        predicted = (row.get("predicted") or {}).get("bubble_fraction")
        rate = (row.get("throughput") or {}).get("samples_per_s")
        parts = []
        if isinstance(measured, (int, float)):
            parts.append(f"bubble {measured:.4f}")
        if isinstance(predicted, (int, float)):
            parts.append(f"predicted {predicted:.4f}")
        if isinstance(rate, (int, float)):
            parts.append(f"{rate:.4g} samples/s")
        if partition_text(row):
            parts.append(partition_text(row))
        return ", ".join(parts) or "ok"
    if row["status"] == "ok":
        bubble = row.get("bubble_fraction")
        return f"bubble {bubble:.4f}" if isinstance(bubble, (int, float)) else "ok"
    return f"{row['status']}: {row.get('error', '')}"
