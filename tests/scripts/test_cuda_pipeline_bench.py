"""benchmarks/cuda_pipeline_bench registers only schedule sizes ppbench accepts: a row whose
schedule the generator refuses would only report an error on the GPU machine and fail gpu-check's
benchmarks piece. Listing needs no GPU; each listed size is checked with `ppbench show`.

Uses the built programs (PPBENCH_BUILD_DIR, default build/); skips where they are not built."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from compare_perf import normalize_name
from conftest import ROOT

BUILD = Path(os.environ.get("PPBENCH_BUILD_DIR", ROOT / "build"))
BENCH = BUILD / "benchmarks" / "cuda_pipeline_bench"
PPBENCH = BUILD / "ppbench"
NAME = re.compile(r"^BM_(?P<bench>Scaling|Fidelity|Overhead|OverheadGraph)/(?P<schedule>[^/]+)"
                  r"/D(?P<d>\d+)"
                  r"/N(?P<n>\d+)(?:/v(?P<v>\d+))?$")


@pytest.fixture(scope="module")
def listed_raw() -> list[str]:
    if not (BENCH.is_file() and PPBENCH.is_file()):
        pytest.skip(f"cuda_pipeline_bench or ppbench not built in {BUILD}")
    run = subprocess.run([str(BENCH), "--benchmark_list_tests"], capture_output=True, text=True,
                         check=False, timeout=120)
    assert run.returncode == 0, run.stderr
    return [line.strip() for line in run.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def listed(listed_raw) -> list[re.Match]:
    # Without Google Benchmark's option parts (/iterations:1, /manual_time, ...).
    names = [normalize_name(line) for line in listed_raw]
    matches = [NAME.match(n) for n in names]
    assert all(matches), [n for n, m in zip(names, matches) if not m]
    return matches


def test_every_listed_size_is_one_ppbench_accepts(listed):
    sizes = sorted({(m["schedule"], m["d"], m["n"], m["v"]) for m in listed})
    assert any(s[0] == "dualpipe" for s in sizes)
    refused = []
    for schedule, d, n, v in sizes:
        cmd = [str(PPBENCH), "show", "--schedule", schedule, "--devices", d, "--microbatches", n]
        if v:
            cmd += ["--chunks", v]
        run = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if run.returncode != 0:
            refused.append(f"{schedule} D{d} N{n}: {run.stderr.strip()}")
    assert refused == []


def test_overhead_rows_cover_every_family_it_names(listed):
    # Leaving refused sizes out must not leave a family out altogether.
    overhead = {m["schedule"] for m in listed if m["bench"] == "Overhead"}
    assert overhead == {"1f1b", "gpipe", "zb-h1", "interleaved-1f1b", "dualpipe"}
    assert sum(m["bench"] == "Scaling" for m in listed) == 3


def test_each_cuda_graph_row_has_its_eager_row_on_one_rank(listed):
    # --cuda-graph runs one rank per GPU, so on one GPU its rows are at D = 1; each stands beside
    # the same step launched eagerly on the same placement.
    graph = {(m["schedule"], m["n"]) for m in listed if m["bench"] == "OverheadGraph"}
    assert graph and {m["d"] for m in listed if m["bench"] == "OverheadGraph"} == {"1"}
    eager_one_rank = {(m["schedule"], m["n"]) for m in listed
                      if m["bench"] == "Overhead" and m["d"] == "1"}
    assert graph == eager_one_rank


def test_every_row_runs_a_fixed_number_of_iterations(listed_raw):
    # Each call of a row's function builds its partitions and executor again; a row left to
    # Google Benchmark's iteration search is called several times per repetition, and the whole
    # program can outrun gpu-check's step limit, which leaves no JSON at all.
    loose = [name for name in listed_raw if "/iterations:" not in name]
    assert loose == []
    overhead = [name for name in listed_raw if name.startswith("BM_Overhead")]
    assert len(overhead) > 50
