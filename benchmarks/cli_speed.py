#!/usr/bin/env python3
"""ppbench's speed as a user meets it: whole processes, timed from start to exit.

    benchmarks/cli_speed.py [--ppbench build/ppbench] [--repeats 7] [--out FILE]

Measures, each the median of --repeats runs (wall time from start to exit; peak resident memory
of one more run under GNU time, /usr/bin/time, where it exists):
  - `ppbench list`;
  - `ppbench simulate -s 1f1b -d 256 -n 8192 --format json` (4.2 M actions): actions per second
    and resident bytes per action;
  - `ppbench simulate -s 1f1b` against benchmarks/py_simulator.py (a plain Python simulator of
    the same schedule) at D = 64, N = 1024 and D = 16, N = 256: the ratio of their times, after
    checking that both give the same makespan.
Prints a table; --out writes the figures as JSON with the machine's provenance (atomically).
Goals (docs/bench.md): list < 10 ms and < 20 MB; simulate >= 20 M actions/s and <= 32 bytes per
action; >= 50x the Python simulator at D = 64, N = 1024 and >= 10x at D = 16, N = 256.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from results_io import atomic_write  # noqa: E402
from script_cli import (InputError, OneLineParser, ScriptError, number,  # noqa: E402
                        output_path, run)


def run_child(cmd: list[str]) -> tuple[float, str]:
    """Wall seconds and stdout of one run (subprocess starts it with vfork/posix_spawn where it
    can, so the interpreter's size does not slow the start)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise ScriptError(f"{' '.join(cmd)} exited {r.returncode}")
    return wall, r.stdout.decode()


def record_of(run: dict, what: str, *numbers: str) -> dict:
    """The JSON record a timed run printed, with the named fields numbers (ScriptError, exit 1,
    where it printed none, or a record without them: not the program this benchmark times)."""
    try:
        record = json.loads(run["stdout"])
    except (ValueError, RecursionError):
        raise ScriptError(f"{what} printed no JSON record") from None
    if not isinstance(record, dict):
        raise ScriptError(f"{what} printed a JSON {type(record).__name__}, not a record")
    for name in numbers:
        value = record.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScriptError(f"{what} printed a record without the number '{name}'")
    return record


GNU_TIME = "/usr/bin/time"


def peak_rss(cmd: list[str]) -> int | None:
    """The peak resident bytes of cmd alone. A child forked from this Python starts as a copy of
    the interpreter, and the kernel's peak counts that copy (about 10 MB), so the peak is taken
    under GNU time, whose own copy is a few hundred KB; None without it."""
    if not os.access(GNU_TIME, os.X_OK):
        return None
    r = subprocess.run([GNU_TIME, "-f", "%M", *cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    try:
        return int(r.stderr.strip().splitlines()[-1]) * 1024
    except (ValueError, IndexError):
        return None


def median_run(cmd: list[str], repeats: int) -> dict:
    runs = [run_child(cmd) for _ in range(repeats)]
    rss = peak_rss(cmd)
    return {"wall_s": statistics.median(r[0] for r in runs),
            "wall_min_s": min(r[0] for r in runs), "wall_max_s": max(r[0] for r in runs),
            "rss_bytes": rss, "rss_source": "GNU time" if rss is not None else None,
            "stdout": runs[0][1]}


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="cli_speed", description=__doc__.splitlines()[0])
    ap.add_argument("--ppbench", default=str(ROOT / "build" / "ppbench"))
    ap.add_argument("--repeats", type=number(int, 1, 1000), default=7)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if not os.path.isfile(a.ppbench) or not os.access(a.ppbench, os.X_OK):
        raise InputError(f"{a.ppbench} is not an executable ppbench (build it first)")
    if a.out:
        output_path(a.out, "--out")
    pb = a.ppbench
    out: dict = {"repeats": a.repeats}

    ls = median_run([pb, "list"], a.repeats)
    out["list"] = {k: ls[k] for k in ("wall_s", "wall_min_s", "wall_max_s", "rss_bytes",
                                      "rss_source")}

    big = median_run([pb, "simulate", "-s", "1f1b", "-d", "256", "-n", "8192", "--format", "json"],
                     a.repeats)
    record = record_of(big, "ppbench simulate", "actions")
    actions = record["actions"]
    out["simulate_d256_n8192"] = {
        "actions": actions, "wall_s": big["wall_s"], "rss_bytes": big["rss_bytes"],
        "actions_per_s": actions / big["wall_s"],
        "bytes_per_action": big["rss_bytes"] / actions if big["rss_bytes"] and actions else None}
    out["provenance"] = record.get("provenance")

    out["vs_python"] = []
    for d, n in ((64, 1024), (16, 256)):
        ours = median_run([pb, "simulate", "-s", "1f1b", "-d", str(d), "-n", str(n), "--format",
                           "json"], a.repeats)
        py = median_run([sys.executable, str(ROOT / "benchmarks" / "py_simulator.py"), str(d),
                         str(n)], a.repeats)
        m_ours = record_of(ours, "ppbench simulate", "makespan")["makespan"]
        m_py = record_of(py, "py_simulator.py", "makespan")["makespan"]
        if abs(m_ours - m_py) > 1e-9 * max(1.0, m_py):
            raise ScriptError(f"makespans differ at D={d} N={n}: ppbench {m_ours}, Python {m_py}")
        out["vs_python"].append({"devices": d, "microbatches": n, "ppbench_s": ours["wall_s"],
                                 "python_s": py["wall_s"], "speedup": py["wall_s"] / ours["wall_s"],
                                 "makespan": m_ours})

    s = out["simulate_d256_n8192"]

    def mib(b):
        return f"{b / 2**20:7.1f} MiB" if b else "    ? MiB (no GNU time)"
    print(f"list                      {ls['wall_s'] * 1e3:8.2f} ms  {mib(ls['rss_bytes'])}"
          "   (goal < 10 ms, < 20 MB)")
    per = f"{s['bytes_per_action']:.1f}" if s["bytes_per_action"] else "?"
    print(f"simulate D=256 N=8192     {s['wall_s']:8.3f} s   {mib(s['rss_bytes'])}"
          f"   {s['actions_per_s'] / 1e6:.1f} M actions/s, {per} B/action"
          "   (goal >= 20 M/s, <= 32 B)")
    for v in out["vs_python"]:
        goal = 50 if v["devices"] == 64 else 10
        print(f"vs Python D={v['devices']:<3} N={v['microbatches']:<5}  ppbench "
              f"{v['ppbench_s'] * 1e3:7.1f} ms, Python {v['python_s'] * 1e3:8.1f} ms: "
              f"{v['speedup']:.0f}x   (goal >= {goal}x)")
    if a.out:
        atomic_write(a.out, json.dumps(out, indent=1) + "\n")
        print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run("cli_speed", main))
