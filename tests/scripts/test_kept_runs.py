"""scripts/kept_runs.py: the compute slowdown by op from BM_Scaling's two profiles, and the
bubble gap by rank from BM_Fidelity's record, on hand-made files whose answers are known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import SCRIPTS

KEPT_RUNS = SCRIPTS / "kept_runs.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(KEPT_RUNS), *args], capture_output=True, text=True,
                          timeout=60, check=False)


def write(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def rank(r: int, first: float, last: float, busy: float, makespan: float) -> dict:
    return {"rank": r, "first_start": first, "last_end": last, "busy": busy,
            "idle": makespan - busy}


def kept_folder(tmp_path: Path) -> Path:
    kept = tmp_path / "unpacked" / "benchmarks" / "kept"
    # Two stages whose F add up to 3 ms against 2 ms alone (1.5x); B 4 ms against 4 ms.
    write(kept / "scaling-1f1b-D2-N32.profile.json",
          {"stages": [{"F": 0.001, "B": 0.002, "optimizer": 0.0005},
                      {"F": 0.002, "B": 0.002, "optimizer": 0.0005}]})
    write(kept / "scaling-one-partition-of-D2-1f1b-D1-N32.profile.json",
          {"stages": [{"F": 0.002, "B": 0.004, "optimizer": 0.002}]})
    # Measured from t = 1.0 s (the host's start): makespan 10 ms; the replay's 9 ms. Rank 1
    # starts 2 ms after rank 0 where the replay says 1 ms, and ends at the makespan in both:
    # 1 ms more idle (4 against 3), all before its first action. Rank 0 starts first and ends
    # 1 ms before the end in both, 0.5 ms more idle (2.5 against 2), all between its actions.
    measured = {"bubble_fraction": 0.30, "makespan": 0.010,
                "ranks": [rank(0, 1.000, 1.009, 0.0075, 0.010),
                          rank(1, 1.002, 1.010, 0.006, 0.010)]}
    replayed = {"bubble_fraction": 0.25, "makespan": 0.009,
                "ranks": [rank(0, 0.000, 0.008, 0.007, 0.009),
                          rank(1, 0.001, 0.009, 0.006, 0.009)]}
    write(kept / "fidelity-looped-bfs-D2-N8.record.json",
          {"schedule": "looped-bfs", "devices": 2, "microbatches": 8, "measured": measured,
           "predicted": replayed})
    return tmp_path / "unpacked"


def test_the_slowdown_by_op_and_the_gap_by_rank(tmp_path: Path):
    r = run(str(kept_folder(tmp_path)), "--out", str(tmp_path / "kept.md"))
    assert r.returncode == 0, r.stderr
    rows = {tuple(c.strip() for c in line.strip("|").split("|"))
            for line in r.stdout.splitlines() if line.startswith("| ")}
    assert ("2", "32", "F", "3.000", "2.000", "1.50") in rows
    assert ("2", "32", "B", "4.000", "4.000", "1.00") in rows
    assert ("2", "32", "optimizer", "1.000", "2.000", "0.50") in rows
    gap = next(row for row in rows if row[0] == "looped-bfs")
    assert gap[:6] == ("looped-bfs", "2", "8", "0.300", "0.250", "+5.0")
    assert gap[6:10] == ("1", "+1.000", "+1.000", "+0.000")
    assert gap[10] == "r0 +0.50 r1 +1.00"
    assert (tmp_path / "kept.md").read_text() == r.stdout


def test_nothing_kept_is_exit_1_and_bad_input_exit_2(tmp_path: Path):
    r = run(str(tmp_path))
    assert r.returncode == 1 and "nothing kept" in r.stderr
    r = run(str(tmp_path / "absent"))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    write(tmp_path / "kept" / "fidelity-1f1b-D4-N8.record.json", {"schedule": "1f1b"})
    r = run(str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "fidelity-1f1b-D4-N8.record.json" in r.stderr and "Traceback" not in r.stderr
