"""benchmarks/bubble_fidelity on fewer cores than its ranks: it registers no point that would
time-share cores (that measures the OS scheduler, not the schedule), says so on stderr and in the
JSON context, and scripts/compare_perf.py then counts the baseline's points as not run now, with
the reason. One core is had with `taskset -c 0` (the program counts the cores it may run on).

Uses the built program (PPBENCH_BUILD_DIR, default build/); skips where it is not built."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SCRIPTS

BUILD = Path(os.environ.get("PPBENCH_BUILD_DIR", ROOT / "build"))
BENCH = BUILD / "benchmarks" / "bubble_fidelity"


def one_core(*args: str) -> subprocess.CompletedProcess:
    if not BENCH.is_file():
        pytest.skip(f"bubble_fidelity not built in {BUILD}")
    taskset = shutil.which("taskset")
    if taskset is None:
        pytest.skip("no taskset here (util-linux)")
    return subprocess.run([taskset, "-c", "0", str(BENCH), *args], capture_output=True,
                          text=True, check=False, timeout=300)


def test_one_core_lists_only_the_calibration_and_says_why():
    run = one_core("--benchmark_list_tests")
    assert run.returncode == 0, run.stderr
    assert [n.split("/")[0] for n in run.stdout.split()] == ["BM_Calibration"] * 2
    assert run.stderr.splitlines() == [
        "bubble_fidelity: not registered: BM_Fidelity at D=2, D=4: 1 core to run on, and D ranks "
        "on fewer than D cores time-share them, which measures the OS scheduler, not the schedule "
        "(only the calibration benchmarks run)"]


def test_one_core_run_is_counted_not_run_now_with_the_reason(tmp_path):
    latest = tmp_path / "latest-bubble_fidelity.json"
    run = one_core("--benchmark_filter=^BM_Calibration/compute", "--benchmark_min_time=0.01",
                   "--benchmark_repetitions=1", f"--benchmark_out={latest}",
                   "--benchmark_out_format=json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(latest.read_text())
    assert "1 core to run on" in doc["context"]["ppbench_not_registered"]
    assert [r["name"] for r in doc["benchmarks"]] == ["BM_Calibration/compute"]
    # A baseline from a machine with cores to spare: its BM_Fidelity point is not run now.
    base = tmp_path / "baseline-bubble_fidelity.json"
    point = dict(doc["benchmarks"][0], name="BM_Fidelity/1f1b/D2/N8/manual_time",
                 run_name="BM_Fidelity/1f1b/D2/N8/manual_time")
    base.write_text(json.dumps(dict(doc, benchmarks=[*doc["benchmarks"], point])))
    cmp = subprocess.run([sys.executable, str(SCRIPTS / "compare_perf.py"), str(base),
                          str(latest), "--no-compare-py", "--fail-on-regression"],
                         capture_output=True, text=True, check=False)
    assert cmp.returncode == 1, cmp.stderr
    assert f"NOT RUN NOW bubble_fidelity BM_Fidelity/1f1b/D2/N8: in {base}" in cmp.stdout
    assert "NOT REGISTERED bubble_fidelity: BM_Fidelity at D=2, D=4: 1 core" in cmp.stdout
    assert "1 not run now" in cmp.stdout.splitlines()[-1]


def test_two_cores_register_the_two_rank_points():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("fewer than 2 cores to run on here")
    if not BENCH.is_file():
        pytest.skip(f"bubble_fidelity not built in {BUILD}")
    run = subprocess.run([str(BENCH), "--benchmark_list_tests"], capture_output=True, text=True,
                         check=False, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "BM_Fidelity/1f1b/D2/N8/iterations:3/manual_time" in run.stdout.split()
