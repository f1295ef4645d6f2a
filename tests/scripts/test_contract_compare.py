"""The command-line contract (scripts/script_cli.py) of the comparison and GPU-piece scripts:
compare_perf.py, compare_torch.py, compare_pytorch_csv.py, gtest_summary.py, gpu_equivalence.py,
gpu_tables.py, torch_orders.py and torch_reference.py. Each bad input below is one line on stderr
that names it, with exit 2 (3 for a missing module), never a traceback, and leaves no output
behind. No case runs ppbench or a benchmark: every one is refused before the work starts."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

HAS_TORCH = importlib.util.find_spec("torch") is not None
PY = sys.executable  # a program that exists, standing in for ppbench where none is run

# --- tiny inputs ------------------------------------------------------------------------------

CAL = "BM_Calibration/compute"
LAYER = "BM_LlamaLayer/llama3-8b/seq4096/mb1/bf16"


def gbench_row(name: str, ms: float = 2.0, **extra) -> dict:
    return {"name": name, "run_name": name, "run_type": "iteration", "iterations": 10,
            "real_time": ms, "cpu_time": ms, "time_unit": "ms", **extra}


def gbench(*rows: dict, context: object = None) -> dict:
    return {"context": {"cpu_model": "Test CPU"} if context is None else context,
            "benchmarks": list(rows)}


def write(path: Path, data: object) -> None:
    # allow_nan: Google Benchmark's own writer may put NaN and Infinity in its JSON.
    path.write_text(json.dumps(data, allow_nan=True))


def make_inputs(tmp: Path) -> None:
    """Every file the cases name, under tmp."""
    write(tmp / "base.json", gbench(gbench_row(CAL), gbench_row("BM_X")))
    for name, row in {
        "run_name_5": gbench_row("BM_X", run_name=5),
        "unit_list": gbench_row("BM_X", time_unit=[1]),
        "real_nan": gbench_row("BM_X", real_time=math.nan),
        "cpu_inf": gbench_row("BM_X", cpu_time=math.inf),
        "negative": gbench_row("BM_X", real_time=-5.0),
    }.items():
        write(tmp / f"{name}.json", gbench(gbench_row(CAL), row))
    write(tmp / "cal_tiny.json", gbench(gbench_row(CAL, 1e-320), gbench_row("BM_X")))

    write(tmp / "torch.json", {"seq": 4096, "micro_batch": 1, "dtype": "bf16", "median_ms": 30.0})
    layer = gbench_row(LAYER, 40.0, FIW_ms=40.0)
    write(tmp / "ctx_list.json", gbench(layer, context=[1]))
    write(tmp / "ctx_str.json", gbench(layer, context="x"))
    write(tmp / "layer_run_name_5.json", gbench({**layer, "run_name": 5}))
    write(tmp / "layer_unit_list.json", gbench({**layer, "time_unit": [1]}))

    write(tmp / "gt_list.json", [])
    write(tmp / "gt_suite_5.json", {"testsuites": [5]})
    write(tmp / "gt_suites_obj.json", {"testsuites": {"name": "A"}})
    write(tmp / "gt_failures_5.json",
          {"testsuites": [{"name": "A", "testsuite": [{"name": "t", "failures": [5]}]}]})
    (tmp / "a-folder").mkdir()
    (tmp / "a-file").write_text("x")


# --- the cases --------------------------------------------------------------------------------

# (script, arguments, exit status, words of the one stderr line, paths under tmp that must not
# exist afterwards). {tmp} is the test's folder, {py} a program that exists.
CASES = {
    # compare_perf.py
    "perf-bad-option": ("compare_perf", ["{tmp}/base.json", "{tmp}/base.json", "--bogus"], 2,
                        "--bogus", []),
    "perf-run-name-5": ("compare_perf", ["{tmp}/base.json", "{tmp}/run_name_5.json"], 2,
                        "run_name that is not a string", []),
    "perf-time-unit-list": ("compare_perf", ["{tmp}/base.json", "{tmp}/unit_list.json"], 2,
                            "unknown time_unit [1]", []),
    "perf-nan-time": ("compare_perf", ["{tmp}/base.json", "{tmp}/real_nan.json"], 2,
                      "real_nan.json: 'BM_X' has a real_time of nan", []),
    "perf-inf-time": ("compare_perf", ["{tmp}/base.json", "{tmp}/cpu_inf.json"], 2,
                      "'BM_X' has a cpu_time of inf", []),
    "perf-negative-time": ("compare_perf", ["{tmp}/base.json", "{tmp}/negative.json"], 2,
                           "allowed: a finite time >= 0", []),
    "perf-tiny-calibration": ("compare_perf", ["{tmp}/base.json", "{tmp}/cal_tiny.json"], 2,
                              "allowed: >= 1 ns", []),
    "perf-threshold-nan": ("compare_perf", ["{tmp}/base.json", "{tmp}/base.json", "--threshold",
                                            "nan"], 2, "--threshold: 'nan' is not a finite", []),
    "perf-threshold-for-nan": ("compare_perf", ["{tmp}/base.json", "{tmp}/base.json",
                                                "--threshold-for", "x=nan"], 2,
                               "--threshold-for", []),
    "perf-normalised-dir": ("compare_perf", ["{tmp}/base.json", "{tmp}/base.json",
                                             "--normalised-dir", "/proc/no-such/n"], 2,
                            "--normalised-dir /proc/no-such/n: cannot write there", []),
    # compare_torch.py
    "torch-bad-option": ("compare_torch", ["{tmp}/ctx_list.json", "{tmp}/torch.json", "--bogus"],
                         2, "--bogus", []),
    "torch-context-list": ("compare_torch", ["{tmp}/ctx_list.json", "{tmp}/torch.json", "--out",
                                             "{tmp}/o.json"], 2,
                           "'context' is a JSON array, not an object", ["o.json"]),
    "torch-context-str": ("compare_torch", ["{tmp}/ctx_str.json", "{tmp}/torch.json", "--out",
                                            "{tmp}/o.json"], 2,
                          "'context' is a JSON string, not an object", ["o.json"]),
    "torch-run-name-5": ("compare_torch", ["{tmp}/layer_run_name_5.json", "{tmp}/torch.json",
                                           "--out", "{tmp}/o.json"], 2,
                         "run_name that is not a string", ["o.json"]),
    "torch-time-unit-list": ("compare_torch", ["{tmp}/layer_unit_list.json", "{tmp}/torch.json",
                                               "--out", "{tmp}/o.json"], 2,
                             "unknown time_unit [1]", ["o.json"]),
    "torch-goal-nan": ("compare_torch", ["{tmp}/ctx_list.json", "{tmp}/torch.json", "--goal",
                                         "nan"], 2, "--goal: 'nan' is not a finite", []),
    "torch-goal-negative": ("compare_torch", ["{tmp}/ctx_list.json", "{tmp}/torch.json",
                                              "--goal", "-1"], 2, "allowed: > 0", []),
    # gtest_summary.py
    "gtest-bad-option": ("gtest_summary", ["--log", "/dev/null", "--bogus"], 2, "--bogus", []),
    "gtest-json-list": ("gtest_summary", ["--json", "{tmp}/gt_list.json", "--out",
                                          "{tmp}/s.json"], 2,
                        "gt_list.json: a JSON object was expected, not array", ["s.json"]),
    "gtest-suites-5": ("gtest_summary", ["--json", "{tmp}/gt_suite_5.json", "--out",
                                         "{tmp}/s.json"], 2,
                       "'testsuites' of the file is not a list of objects", ["s.json"]),
    "gtest-suites-object": ("gtest_summary", ["--json", "{tmp}/gt_suites_obj.json"], 2,
                            "'testsuites' of the file is not a list of objects", []),
    "gtest-failures-5": ("gtest_summary", ["--json", "{tmp}/gt_failures_5.json"], 2,
                         "'failures' of test 'A.t' is not a list of objects", []),
    "gtest-out-unwritable": ("gtest_summary", ["--log", "/dev/null", "--out",
                                               "/proc/no-such/o.json"], 2,
                             "--out /proc/no-such/o.json: cannot write there", []),
    "gtest-out-folder": ("gtest_summary", ["--log", "/dev/null", "--out", "{tmp}/a-folder"], 2,
                         "is a folder; give a file name", []),
    # gpu_equivalence.py
    "equiv-bad-option": ("gpu_equivalence", ["--out-dir", "{tmp}/ge", "--bogus", "--", "{py}"], 2,
                         "unrecognized arguments: --bogus", ["ge"]),
    "equiv-filter-regex": ("gpu_equivalence", ["--out-dir", "{tmp}/ge", "--filter", "(", "--",
                                               "{py}"], 2,
                           "--filter: '(' is not a regular expression", ["ge"]),
    "equiv-out-dir-unwritable": ("gpu_equivalence", ["--out-dir", "/proc/no-such/ge", "--",
                                                     "{py}"], 2, "cannot write there", []),
    "equiv-out-dir-file": ("gpu_equivalence", ["--out-dir", "{tmp}/a-file", "--", "{py}"], 2,
                           "exists and is not a folder", []),
    "equiv-no-program": ("gpu_equivalence", ["--out-dir", "{tmp}/ge", "--", "{tmp}/nope"], 2,
                         "is not a program", ["ge"]),
    "equiv-run-timeout-nan": ("gpu_equivalence", ["--out-dir", "{tmp}/ge", "--run-timeout",
                                                  "nan", "--", "{py}"], 2,
                              "--run-timeout: 'nan' is not a finite", ["ge"]),
    "equiv-devices-negative": ("gpu_equivalence", ["--out-dir", "{tmp}/ge", "--devices", "-1",
                                                   "--", "{py}"], 2,
                               "--devices: -1 is out of range", ["ge"]),
    "equiv-no-command": ("gpu_equivalence", ["--out-dir", "{tmp}/ge"], 2,
                         "give the ppbench command after --", ["ge"]),
    # gpu_tables.py
    "tables-bad-option": ("gpu_tables", ["--out-dir", "{tmp}/gt", "--bogus", "--", "{py}"], 2,
                          "unrecognized arguments: --bogus", ["gt"]),
    "tables-out-dir-unwritable": ("gpu_tables", ["--out-dir", "/proc/no-such/gt", "--", "{py}"],
                                  2, "cannot write there", []),
    "tables-out-dir-file": ("gpu_tables", ["--out-dir", "{tmp}/a-file", "--", "{py}"], 2,
                            "exists and is not a folder", []),
    "tables-no-program": ("gpu_tables", ["--out-dir", "{tmp}/gt", "--", "{tmp}/nope"], 2,
                          "is not a program", ["gt"]),
    "tables-filter-matches-nothing": ("gpu_tables", ["--out-dir", "{tmp}/gt", "--filter", "zzz",
                                                     "--", "{py}"], 2,
                                      "--filter 'zzz' matches none of the", ["gt"]),
    # torch_orders.py
    "orders-bad-option": ("torch_orders", ["--bogus"], 2, "--bogus", []),
    "orders-d-not-a-number": ("torch_orders", ["looped-bfs", "abc", "4"], 2,
                              "D: 'abc' is not a whole number", []),
    "orders-devices-not-a-range": ("torch_orders", ["--compare", "{py}", "--devices", "abc"], 2,
                                   "--devices: 'abc' is not a whole number", []),
    "orders-devices-empty-range": ("torch_orders", ["--compare", "{py}", "--devices", "5-2"], 2,
                                   "'5-2' is an empty range", []),
    "orders-no-program": ("torch_orders", ["--compare", "{tmp}/nope"], 2, "is not a program", []),
    # torch_reference.py: the options are checked before torch is looked for
    "reference-bad-option": ("torch_reference", ["--bogus"], 2, "--bogus", []),
    "reference-heads-0": ("torch_reference", ["--heads", "0"], 2,
                          "--heads: 0 is out of range", []),
    "reference-iters-0": ("torch_reference", ["--iters", "0"], 2,
                          "--iters: 0 is out of range", []),
    "reference-heads-not-dividing": ("torch_reference", ["--heads", "5"], 2,
                                     "--heads 5 must divide --hidden 4096", []),
    "reference-out-unwritable": ("torch_reference", ["--out", "/proc/no-such/t.json"], 2,
                                 "--out /proc/no-such/t.json: cannot write there", []),
    # compare_pytorch_csv.py
    "csv-bad-option": ("compare_pytorch_csv", ["--bogus"], 2, "--bogus", []),
    "csv-no-program": ("compare_pytorch_csv", ["{tmp}/nope"], 2, "is not a program", []),
}

# Without torch (never installed in CI): exit 3, the machine's, in one line.
NO_TORCH_CASES = {
    "orders-order": ("torch_orders", ["looped-bfs", "2", "4"], 3,
                     "needs the Python module 'torch'", []),
    "orders-compare": ("torch_orders", ["--compare", "{py}"], 3,
                       "needs the Python module 'torch'", []),
    "reference": ("torch_reference", ["--parts", "--out", "{tmp}/t.json"], 3,
                  "needs the Python module 'torch'", ["t.json"]),
    "csv": ("compare_pytorch_csv", ["{py}"], 3, "needs the Python module 'torch'", []),
}


def run_script(script: str, args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPLBACKEND="Agg", CUDA_VISIBLE_DEVICES="")
    env.pop("PPBENCH_TRACEBACK", None)
    args = [a.replace("{tmp}", str(tmp)).replace("{py}", PY) for a in args]
    return subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), *args],
                          capture_output=True, text=True, timeout=60, cwd=tmp, env=env,
                          check=False)


def check_case(case: tuple, tmp: Path) -> None:
    script, args, status, words, absent = case
    make_inputs(tmp)
    before = {p.name for p in tmp.iterdir()}
    done = run_script(script, args, tmp)
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == status, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{'perf' if script == 'compare_perf' else script}: "), lines[0]
    assert words in lines[0], lines[0]
    for name in absent:
        assert not (tmp / name).exists(), name
    # Nothing half written: no new file or folder (a temp file included) beside the inputs.
    assert {p.name for p in tmp.iterdir()} == before, sorted({p.name for p in tmp.iterdir()}
                                                             - before)
    assert list((tmp / "a-folder").iterdir()) == []


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_and_leaves_nothing(case: tuple, tmp_path: Path):
    check_case(case, tmp_path)


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed here")
@pytest.mark.parametrize("case", NO_TORCH_CASES.values(), ids=NO_TORCH_CASES.keys())
def test_without_torch_is_exit_3_in_one_line(case: tuple, tmp_path: Path):
    check_case(case, tmp_path)


@pytest.mark.parametrize("script", ["gpu_equivalence", "gpu_tables"])
def test_help_needs_no_ppbench_command(script: str, tmp_path: Path):
    # --help used to be refused for want of the ppbench command after --.
    done = run_script(script, ["--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout and "PPBENCH_COMMAND" in done.stdout
    assert done.stderr == ""
