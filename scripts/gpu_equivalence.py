#!/usr/bin/env python3
"""The `equivalence` piece of scripts/gpu-check.sh: every schedule `ppbench list` names, at
D in {2, 4, 8} virtual devices, on each workload variant below, run for one step with `--check`
(ppbench compares the pipelined step's loss and gradients with an unpipelined reference and puts
{"max_rel_error", "worst_tensor", "tolerance", "passed"} under "check" in its JSON record).

For each (variant, schedule, D) the first N of D, 2D, 4D that ppbench accepts is run; ppbench
exits 2 for a combination it does not allow (a schedule's N or D constraint, fewer layers than
stages), which is recorded as not applicable where `ppbench memory` (no GPU) refuses it too; a
refusal that only the GPU run makes (too few SMs for D partitions) is an error. Every record goes
to equivalence.jsonl as soon as it is known (so a run stopped at its time limit keeps what it
did); equivalence.txt is the table and equivalence.json the counts.

Usage: gpu_equivalence.py --out-dir DIR [--filter REGEX] [--devices 2,4,8] [--variants LIST]
                          [--run-timeout S] -- PPBENCH_COMMAND...
  PPBENCH_COMMAND: how to start ppbench, e.g. `gpu-bundle/run ppbench` or `build-gpu/ppbench`
  --filter REGEX: only the cases whose label matches, labels being VARIANT/SCHEDULE/D<d>
                  (e.g. 'mlp-f32/' or '/D8$'), to split the piece across machine calls
Exit: 0 every case passed or was not applicable (and at least one ran); 1 a case failed, ppbench
has no --check flag, or nothing ran; 2 bad usage (an option, a --filter that matches no case, a
command after -- that is not a program, an --out-dir that cannot be written); 3 ppbench cannot
be started; 124 stopped by SIGTERM (the time limit).
Plain python3, no third-party modules.
"""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_runs import check_program, parse_piece, piece_parser, regex, run_timed  # noqa: E402
from results_io import atomic_write  # noqa: E402
from script_cli import MachineError, number, number_list  # noqa: E402
from script_cli import output_path, run, say  # noqa: E402

# The workload variants, in one place: (name, flags). --steps 1 --warmup 1 --check --format json
# and the backend/placement flags are added to each. The first four check the forward and backward
# alone; the optimizer variants check that the warm-up step's update reaches the measured step
# (--check then runs two steps on one device). AdamW's first steps are about lr * sign(g), and
# two f32 runs may disagree on the sign of a near-zero gradient: its f32 tolerance is 1e-3.
MLP = ["--workload", "mlp", "--layers", "8", "--width", "256"]
LLAMA = ["--workload", "transformer", "--preset", "tiny-llama", "--layers", "8"]
VARIANTS: list[tuple[str, list[str]]] = [
    ("mlp-f32", [*MLP, "--dtype", "f32", "--optimizer", "none"]),
    ("mlp-bf16", [*MLP, "--dtype", "bf16", "--optimizer", "none"]),
    ("transformer-f32", [*LLAMA, "--dtype", "f32", "--optimizer", "none"]),
    ("transformer-bf16", [*LLAMA, "--dtype", "bf16", "--optimizer", "none"]),
    ("mlp-f32-sgd", [*MLP, "--dtype", "f32", "--optimizer", "sgd", "--lr", "0.05"]),
    ("mlp-f32-adamw", [*MLP, "--dtype", "f32", "--optimizer", "adamw", "--check-tolerance",
                       "1e-3"]),
    ("transformer-bf16-adamw", [*LLAMA, "--dtype", "bf16", "--optimizer", "adamw"]),
]
COMMON = ["--backend", "cuda", "--steps", "1", "--warmup", "1", "--check", "--format", "json"]
CHECK_FLAG = "--check"
# ppbench's exit code 2 is bad input: here a combination the schedule refuses (N < D, ...),
# unless the command line itself was refused (a flag this ppbench does not know). Exit 3 is the
# machine, and fails the piece like any other error.
EXIT_INVALID = 2
BAD_COMMAND_LINE = "run with --help"


def schedules(ppbench: list[str]) -> list[str]:
    """Schedule names from `ppbench list --format json` where it exists, else from its table."""
    r = ppbench_output([*ppbench, "list", "--format", "json"])
    if r.returncode == 0:
        try:
            data = json.loads(r.stdout)
            items = data.get("schedules", data) if isinstance(data, dict) else data
            names = [i["name"] if isinstance(i, dict) else str(i) for i in items]
            if names:
                return names
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
    r = ppbench_output([*ppbench, "list"])
    if r.returncode != 0:
        raise RuntimeError(f"`ppbench list` failed (exit {r.returncode}): {r.stderr.strip()[:300]}")
    return parse_list_text(r.stdout)


def ppbench_output(cmd: list[str]) -> subprocess.CompletedProcess:
    """A quick ppbench query (list, --help); MachineError where it cannot be started."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise MachineError(f"cannot run {cmd[0]}: {e.strerror or e}") from None


def parse_list_text(text: str) -> list[str]:
    """The first column of `ppbench list`'s table, from the header to the first blank line; a
    line that starts with a blank continues the row above (a description moved under its
    column)."""
    names, in_table = [], False
    for line in text.splitlines():
        if not in_table:
            in_table = line.split()[:1] == ["schedule"]
            continue
        if not line.strip():
            break
        if line[0].isspace():
            continue
        name = line.split()[0]
        if re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
            names.append(name)
    return names


class Recorder:
    def __init__(self, out_dir: Path, devices: list[int], variants: list[str]):
        self.out_dir = out_dir
        self.devices = devices
        self.variants = variants
        self.rows: list[dict] = []
        self.schedules: list[str] = []
        self.jsonl = None  # opened at the first record, so a run that records none leaves none

    def add(self, record: dict) -> None:
        self.rows.append(record["equivalence"])
        if self.jsonl is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self.jsonl = open(self.out_dir / "equivalence.jsonl", "a", encoding="utf-8")
        self.jsonl.write(json.dumps(record) + "\n")
        self.jsonl.flush()

    def finish(self, note: str = "") -> dict:
        counts: dict[str, int] = {}
        for r in self.rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        summary = {"counts": counts, "cases": len(self.rows), "note": note,
                   "failed": [r["label"] for r in self.rows
                              if r["status"] not in ("passed", "not_applicable")]}
        atomic_write(self.out_dir / "equivalence.json", json.dumps(summary, indent=2) + "\n")
        atomic_write(self.out_dir / "equivalence.txt", self.table(note))
        return summary

    def table(self, note: str) -> str:
        cells = {(r["variant"], r["schedule"], r["devices"]): r for r in self.rows}
        # Columns as wide as their longest name, and a blank beside (a name never runs on).
        vw = max([len("variant"), *map(len, self.variants)]) + 2
        sw = max([len("schedule"), *map(len, self.schedules)]) + 2
        head = f"{'variant':{vw}}{'schedule':{sw}}" + "".join(f"{'D=' + str(d):28}"
                                                              for d in self.devices)
        lines = [head.rstrip()]
        for v in self.variants:
            for s in self.schedules:
                if not any((v, s, d) in cells for d in self.devices):
                    continue
                row = f"{v:{vw}}{s:{sw}}"
                for d in self.devices:
                    row += f"{cell(cells.get((v, s, d))):28}"
                lines.append(row.rstrip())
        c: dict[str, int] = {}
        for r in self.rows:
            c[r["status"]] = c.get(r["status"], 0) + 1
        lines.append("")
        lines.append(", ".join(f"{k}: {n}" for k, n in sorted(c.items())) or "no cases run")
        if note:
            lines.append(note)
        return "\n".join(lines) + "\n"


def cell(r: dict | None) -> str:
    if r is None:
        return "-"
    err = r.get("max_rel_error")
    e = f" {err:.1e}" if isinstance(err, (int, float)) else ""
    return {"passed": f"ok N={r.get('microbatches')}{e}",
            "failed": f"FAIL N={r.get('microbatches')}{e}",
            "not_applicable": "n/a",
            "timed_out": f"TIMEOUT N={r.get('microbatches')}",
            }.get(r["status"], f"ERROR rc={r.get('rc')}")


# The flags of a variant that `ppbench memory` takes too: the workload and its dtype.
MODEL_FLAGS = {"--workload", "--layers", "--width", "--preset", "--dtype"}


def schedule_allows(ppbench: list[str], flags: list[str], schedule: str, d: int, n: int,
                    timeout: float) -> bool:
    """Whether the schedule and the workload take D and N apart from any GPU: `ppbench memory`
    (no GPU) refuses what they refuse (N < D, fewer layers than stages) with the same exit 2."""
    model = [x for k, v in zip(flags[::2], flags[1::2]) if k in MODEL_FLAGS for x in (k, v)]
    cmd = [*ppbench, "memory", *model, "--schedule", schedule, "--devices", str(d),
           "--microbatches", str(n), "--format", "json"]
    return run_timed(cmd, timeout).rc == 0


def run_case(ppbench: list[str], variant: str, flags: list[str], schedule: str, d: int,
             timeout: float) -> dict:
    """The record of one (variant, schedule, D): the first N ppbench takes, or not applicable."""
    refusals = []
    for n in (d, 2 * d, 4 * d):
        cmd = [*ppbench, "run", *COMMON, "--virtual-devices", str(d), "--devices", str(d),
               "--microbatches", str(n), "--schedule", schedule, *flags]
        eq = {"label": f"{variant}/{schedule}/D{d}", "variant": variant, "schedule": schedule,
              "devices": d, "microbatches": n, "command": " ".join(cmd)}
        run = run_timed(cmd, timeout)
        eq.update({"seconds": run.seconds, "rc": run.rc})
        if run.timed_out:
            return {"equivalence": {**eq, "status": "timed_out", "error": run.error}}
        if run.rc == EXIT_INVALID and BAD_COMMAND_LINE not in run.error:
            if schedule_allows(ppbench, flags, schedule, d, n, timeout):
                # The schedule takes this D and N, so the GPU side refused it (too few SMs for
                # D partitions, a flag the CUDA backend does not take): a finding, not n/a.
                return {"equivalence": {**eq, "status": "error", "error": run.error[-800:]}}
            refusals.append(f"N={n}: {run.error.splitlines()[-1] if run.error else 'exit 2'}")
            continue
        if run.rc != 0:
            return {"equivalence": {**eq, "status": "error", "error": run.error[-800:]}}
        try:
            rec = json.loads(run.stdout)
        except ValueError:
            return {"equivalence": {**eq, "status": "error",
                                    "error": "stdout is not one JSON record: " + run.stdout[:300]}}
        check = rec.get("check") if isinstance(rec, dict) else None
        if not isinstance(check, dict) or "passed" not in check:
            return {**(rec if isinstance(rec, dict) else {}),
                    "equivalence": {**eq, "status": "error",
                                    "error": "the record has no check.passed "
                                             "(is --check in this ppbench?)"}}
        eq.update({k: check.get(k) for k in ("max_rel_error", "worst_tensor", "tolerance")})
        eq["status"] = "passed" if check.get("passed") is True else "failed"
        return {**rec, "equivalence": eq}
    eq = {"label": f"{variant}/{schedule}/D{d}", "variant": variant, "schedule": schedule,
          "devices": d, "microbatches": None, "status": "not_applicable",
          "error": "; ".join(refusals)}
    return {"equivalence": eq}


def main(argv: list[str] | None = None) -> int:
    ap = piece_parser("gpu_equivalence", __doc__.split("\n\n")[0])
    ap.add_argument("--filter", type=regex, default="", help="regex over VARIANT/SCHEDULE/D<d>")
    ap.add_argument("--devices", type=number_list(int, 1), default="2,4,8",
                    help="virtual device counts D, comma-separated (default 2,4,8)")
    ap.add_argument("--variants", default=",".join(v for v, _ in VARIANTS))
    ap.add_argument("--run-timeout", type=number(float, 0, low_open=True), default=180.0,
                    help="seconds one ppbench run may take (default 180)")
    ppbench, args = parse_piece(ap, argv)
    devices, flt = args.devices, args.filter
    known = dict(VARIANTS)
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in known:
            ap.error(f"unknown variant '{v}' in --variants (known: {', '.join(known)})")
    if not variants:
        ap.error(f"--variants names no variant (known: {', '.join(known)})")
    check_program(ppbench)
    output_path(args.out_dir, "--out-dir", folder=True)

    rec = Recorder(args.out_dir, devices, variants)

    def stop(signum, frame):  # the piece's time limit: keep the table of what was done
        s = rec.finish(note="stopped at the time limit (SIGTERM): the cases above are all that ran")
        print(f"gpu_equivalence: stopped by signal {signum} after {s['cases']} cases",
              file=sys.stderr)
        sys.exit(124)

    signal.signal(signal.SIGTERM, stop)

    try:
        help_text = ppbench_output([*ppbench, "run", "--help"]).stdout
    except subprocess.TimeoutExpired:
        rec.finish(note="`ppbench run --help` gave no answer within 60 s: nothing run")
        print("gpu_equivalence: `ppbench run --help` gave no answer within 60 s", file=sys.stderr)
        return 1
    if CHECK_FLAG not in help_text:
        rec.finish(note=f"ppbench run has no {CHECK_FLAG} flag: nothing run")
        print(f"gpu_equivalence: `ppbench run --help` lists no {CHECK_FLAG} flag; the equivalence "
              "check needs a ppbench that has it", file=sys.stderr)
        return 1
    try:
        rec.schedules = schedules(ppbench)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        rec.finish(note=str(e))
        say("gpu_equivalence", str(e))  # ppbench's stderr folded into the one line
        return 1
    if not rec.schedules:
        rec.finish(note="`ppbench list` names no schedule: nothing run")
        print("gpu_equivalence: `ppbench list` names no schedule", file=sys.stderr)
        return 1
    print(f"gpu_equivalence: schedules: {' '.join(rec.schedules)}", flush=True)
    labels = [f"{v}/{s}/D{d}" for v in variants for s in rec.schedules for d in devices]
    if not any(flt.search(label) for label in labels):
        rec.finish(note=f"--filter '{flt.pattern}' matches no case: nothing run")
        print(f"gpu_equivalence: --filter '{flt.pattern}' matches none of the {len(labels)} "
              f"labels VARIANT/SCHEDULE/D<d> (e.g. {labels[0]}); variants: {', '.join(variants)}",
              file=sys.stderr)
        return 2

    for v in variants:
        for s in rec.schedules:
            for d in devices:
                label = f"{v}/{s}/D{d}"
                if not flt.search(label):
                    continue
                r = run_case(ppbench, v, known[v], s, d, args.run_timeout)
                e = r["equivalence"]
                line = f"{label}: {e['status']}"
                if e.get("microbatches"):
                    line += f" N={e['microbatches']}"
                if e.get("max_rel_error") is not None:
                    line += f" max_rel_error={e['max_rel_error']}"
                if e.get("error") and e["status"] != "passed":
                    line += f" ({e['error'][:300]})"
                print(line, flush=True)
                rec.add(r)
    s = rec.finish()
    print((rec.out_dir / "equivalence.txt").read_text(), end="")
    ran = s["counts"].get("passed", 0) + s["counts"].get("failed", 0)
    if s["failed"]:
        return 1
    if ran == 0:
        print("gpu_equivalence: no case ran (all filtered out or not applicable)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run("gpu_equivalence", main))
