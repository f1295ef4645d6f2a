"""scripts/benchmark_rows.py: the finished rows of a Google Benchmark program stopped at a time
limit are kept as one whole JSON, from its cut --benchmark_out file or its console log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SCRIPTS

import benchmark_rows

CONTEXT = {"date": "2026-11-29T00:00:00+00:00", "host_name": "vm", "num_cpus": 16,
           "caches": [{"type": "Data", "level": 1, "size": 49152}]}
ROWS = [{"name": f"BM_Gemm/{n}", "run_type": "iteration", "real_time": float(n),
         "TFLOP/s": n / 1000.0} for n in (1024, 2048, 4096)]


def reporter_document(rows: list[dict]) -> str:
    """What Google Benchmark's JSON reporter writes: two-space indents, a row per object."""
    return json.dumps({"context": CONTEXT, "benchmarks": rows}, indent=2) + "\n"


def cut_after_row(k: int) -> str:
    """The document as a program stopped while writing row k (0-based) leaves it."""
    whole = reporter_document(ROWS)
    return whole[:whole.index(f'"name": "{ROWS[k]["name"]}"') + 30]


def rows_of(path: Path) -> list[str]:
    return [r["name"] for r in json.loads(path.read_text())["benchmarks"]]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / "benchmark_rows.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_a_cut_document_keeps_every_row_before_the_cut_and_the_context():
    for k in range(len(ROWS)):
        kept = benchmark_rows.salvage(cut_after_row(k))
        if k == 0:
            assert kept is None  # nothing finished
            continue
        assert kept["benchmarks"] == ROWS[:k]
        assert kept["context"] == CONTEXT


def test_lines_that_are_not_the_reporter_s_are_dropped():
    # The bundle launcher's banner comes first and a benchmark's own stderr line can land
    # between two lines of a row: neither may end the rows early or enter one.
    lines = cut_after_row(2).splitlines()
    at = next(i for i, line in enumerate(lines) if '"real_time": 2048' in line)
    lines.insert(at, "cuda_pipeline_bench: 1f1b-D8 kept nothing: disk full")
    text = "gpu-bundle: cuBLASLt 13 from /usr/local/cuda/lib64\n" + "\n".join(lines)
    assert benchmark_rows.salvage(text)["benchmarks"] == ROWS[:2]


def test_the_log_is_taken_where_it_has_more_rows_than_the_cut_file(tmp_path: Path):
    # The file stream's buffer is lost with the process; the line-buffered log is not.
    (tmp_path / "b.json").write_text(cut_after_row(1))
    (tmp_path / "b.log").write_text(cut_after_row(2))
    r = run("--json", str(tmp_path / "b.json"), "--log", str(tmp_path / "b.log"),
            "--out", str(tmp_path / "b.json"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cut: 2 finished rows kept from the log, the last BM_Gemm/2048"
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["cut"] == {"source": "log", "rows": 2}
    assert rows_of(tmp_path / "b.json") == ["BM_Gemm/1024", "BM_Gemm/2048"]


def test_a_whole_file_is_kept_as_it_is_without_cut(tmp_path: Path):
    (tmp_path / "b.json").write_text(reporter_document(ROWS))
    r = run("--json", str(tmp_path / "b.json"), "--out", str(tmp_path / "out.json"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "whole: 3 rows"
    assert json.loads((tmp_path / "out.json").read_text()) == {"context": CONTEXT,
                                                               "benchmarks": ROWS}


@pytest.mark.parametrize("log", ["", "gpu-bundle: no cuBLAS found\n", '{\n  "context": {\n',
                                 "[" * 100000])
def test_no_finished_row_is_exit_1_and_writes_nothing(tmp_path: Path, log: str):
    (tmp_path / "b.log").write_text(log)
    r = run("--json", str(tmp_path / "missing.json"), "--log", str(tmp_path / "b.log"),
            "--out", str(tmp_path / "out.json"))
    assert r.returncode == 1, r.stderr
    assert r.stdout.strip() == "no finished row in the JSON or the log"
    assert not (tmp_path / "out.json").exists()


def test_without_an_input_it_is_exit_2_naming_them(tmp_path: Path):
    r = run("--out", str(tmp_path / "out.json"))
    assert r.returncode == 2
    assert r.stderr.strip() == "benchmark_rows: give --json and/or --log (see --help)"
