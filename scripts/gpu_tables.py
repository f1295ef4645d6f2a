#!/usr/bin/env python3
"""The `tables` piece of scripts/gpu-check.sh: the GPU columns of GPipe's Tables 2 and 3 and of
the 1F1B throughput-scaling figure, measured on one GPU split into D virtual devices of a fixed
size each (`--virtual-devices D --sms-per-device S`), so that, as with TPU cores or GPUs, each
added device adds compute.

Points, each one `ppbench run --backend cuda ... --format json` of its own:
  - GPipe at K in {2, 4, 8} partitions x M in {1, 4, 32} micro-batches of one sample, on the
    smaller shapes of the paper's models that scripts/gpipe_tables.py also runs on the CPU;
  - 1F1B on that script's scaling model at D in {1, 2, 4, 8}, N fixed (a fixed global batch).
The shapes, K, M, D and N are gpipe_tables.py's own (imported), so its report finds these rows.

Every record goes to DIR/gpu_tables.jsonl as soon as it is known (ppbench's record plus
"gpu_table": label, model, flags, schedule, devices, microbatches, sms_per_device, status, rc,
seconds, error); DIR/gpu_tables.txt is the table of samples per second, written at the end and
when stopped. scripts/gpipe_tables.py --gpu-rows reads the JSON Lines file.

Usage: gpu_tables.py --out-dir DIR [--sms-per-device 16] [--filter REGEX] [--steps 3]
                     [--run-timeout S] -- PPBENCH_COMMAND...
  PPBENCH_COMMAND: how to start ppbench, e.g. `gpu-bundle/run ppbench` or `build-gpu/ppbench`
  --filter REGEX: only the points whose label (SCHEDULE/MODEL/D<d>/N<n>) matches
Exit: 0 every point ran; 1 a point failed, was refused or timed out, or nothing ran; 2 bad
usage (an option, a --filter that matches no point, a command after -- that is not a program, an
--out-dir that cannot be written); 3 ppbench cannot be started; 124 stopped by SIGTERM (the time
limit).
Plain python3, no third-party modules.
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpipe_tables import SCALING_MODEL, SCALING_N, SCALING_PREDICTED_D, SMALL  # noqa: E402
from gpipe_tables_data import KS, MS  # noqa: E402
from gpu_runs import check_program, parse_piece, piece_parser, regex, run_timed  # noqa: E402
from results_io import append_jsonl, atomic_write, loads_finite  # noqa: E402
from script_cli import InputError, number, output_path, run  # noqa: E402

# Each point runs a warm-up step and then the measured ones (ppbench's record holds their median).
WARMUP = 1
# 8 x 16 = 128 SMs: D = 8 partitions of 16 fit a 132-SM H100 or H200 (Hopper's granularity is 8).
DEFAULT_SMS = 16


def points() -> list[dict]:
    """Every point, in the order they run: the GPipe grid model by model, then the scaling."""
    out = [{"schedule": "gpipe", "model": name, "flags": flags, "devices": k, "microbatches": m}
           for name, flags in SMALL.items() for k in KS for m in MS]
    out += [{"schedule": "1f1b", "model": SCALING_MODEL, "flags": SMALL[SCALING_MODEL],
             "devices": d, "microbatches": SCALING_N} for d in SCALING_PREDICTED_D]
    for p in out:
        p["label"] = f"{p['schedule']}/{p['model']}/D{p['devices']}/N{p['microbatches']}"
    return out


def command(ppbench: list[str], p: dict, sms: int, steps: int) -> list[str]:
    return [*ppbench, "run", *p["flags"], "-b", "1", "--schedule", p["schedule"], "--devices",
            str(p["devices"]), "--microbatches", str(p["microbatches"]), "--backend", "cuda",
            "--virtual-devices", str(p["devices"]), "--sms-per-device", str(sms), "--steps",
            str(steps), "--warmup", str(WARMUP), "--format", "json"]


def run_point(ppbench: list[str], p: dict, sms: int, steps: int, timeout: float) -> dict:
    """The record of one point: ppbench's JSON plus "gpu_table"."""
    cmd = command(ppbench, p, sms, steps)
    row = {k: p[k] for k in ("label", "model", "schedule", "devices", "microbatches")}
    row.update({"flags": " ".join(p["flags"]), "sms_per_device": sms, "command": " ".join(cmd)})
    run = run_timed(cmd, timeout)
    row.update({"seconds": run.seconds, "rc": run.rc})
    if run.timed_out:
        return {"gpu_table": {**row, "status": "timed_out", "error": run.error}}
    if run.rc != 0:
        status = "invalid" if run.rc == 2 else "error"
        return {"gpu_table": {**row, "status": status, "error": run.error[-800:]}}
    try:
        # Strict JSON: a NaN would not be JSON in the file these rows are appended to.
        rec = loads_finite(run.stdout)
        sps = rec["throughput"]["samples_per_s"]
    except (ValueError, KeyError, TypeError):
        return {"gpu_table": {**row, "status": "error",
                              "error": "stdout is not a run record: " + run.stdout[:300]}}
    # As gpipe_tables.py --gpu-rows checks an ok row: the tables divide by it.
    if not isinstance(sps, (int, float)) or isinstance(sps, bool) or sps <= 0:
        return {"gpu_table": {**row, "status": "error",
                              "error": f"the run record's throughput.samples_per_s is {sps!r}, "
                                       "not a positive number"}}
    return {**rec, "gpu_table": {**row, "status": "ok"}}


def table(rows: list[dict], note: str = "") -> str:
    """Samples per second per point, one line per model and schedule, one column per (D, N)."""
    lines = []
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        g = r["gpu_table"]
        groups.setdefault((g["schedule"], g["model"]), []).append(r)
    for (schedule, model), rs in groups.items():
        lines.append(f"{schedule}, {model}:")
        for r in rs:
            g = r["gpu_table"]
            value = (f"{r['throughput']['samples_per_s']:10.1f} samples/s"
                     if g["status"] == "ok" else g["status"].upper())
            lines.append(f"  D={g['devices']:<2} N={g['microbatches']:<3} {value}")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["gpu_table"]["status"]] = counts.get(r["gpu_table"]["status"], 0) + 1
    lines += ["", ", ".join(f"{k}: {n}" for k, n in sorted(counts.items())) or "no points run"]
    if note:
        lines.append(note)
    return "\n".join(lines) + "\n"


class Stopped(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    ap = piece_parser("gpu_tables", __doc__.split("\n\n")[0])
    ap.add_argument("--sms-per-device", type=number(int, 1), default=DEFAULT_SMS)
    ap.add_argument("--filter", type=regex, default="", help="regex over SCHEDULE/MODEL/D<d>/N<n>")
    ap.add_argument("--steps", type=number(int, 1), default=3)
    ap.add_argument("--run-timeout", type=number(float, 0, low_open=True), default=120.0)
    ppbench, args = parse_piece(ap, argv)
    flt = args.filter
    every = points()
    chosen = [p for p in every if flt.search(p["label"])]
    if not chosen:
        raise InputError(f"--filter '{flt.pattern}' matches none of the {len(every)} points "
                         f"(labels SCHEDULE/MODEL/D<d>/N<n>, e.g. {every[0]['label']})")
    check_program(ppbench)
    output_path(args.out_dir, "--out-dir", folder=True)

    def stop(signum, frame):
        raise Stopped()

    signal.signal(signal.SIGTERM, stop)
    rows: list[dict] = []
    try:
        for i, p in enumerate(chosen, 1):
            rec = run_point(ppbench, p, args.sms_per_device, args.steps, args.run_timeout)
            rows.append(rec)
            # One locked, synced write per row (results_io): a stop between points leaves
            # whole lines only.
            append_jsonl(args.out_dir / "gpu_tables.jsonl", rec)
            g = rec["gpu_table"]
            print(f"[{i}/{len(chosen)}] {g['label']}: {g['status']} ({g.get('seconds')} s)",
                  flush=True)
    except Stopped:
        atomic_write(args.out_dir / "gpu_tables.txt",
                     table(rows, f"stopped by SIGTERM after {len(rows)} of {len(chosen)} points"))
        return 124
    atomic_write(args.out_dir / "gpu_tables.txt", table(rows))
    ok = sum(r["gpu_table"]["status"] == "ok" for r in rows)
    return 0 if rows and ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(run("gpu_tables", main))
