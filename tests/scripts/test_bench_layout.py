"""`make bench`'s layout: it writes only git-ignored files (results/latest/, plots/latest/), the
committed reference records stay in results/reference/ (never taken for a run), and the docs
say so (docs/bench.md, the README's paragraph)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

WRITE_FLAGS = ("--out", "--out-dir", "--trace-out", "--html")


def git(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=False)


def dry_run(target: str, tmp_path) -> str:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    # a ppbench that lists no GPU, so the CPU sweep is chosen whatever this machine has
    ppbench = tmp_path / "ppbench"
    ppbench.write_text("#!/bin/sh\necho 'ppbench 0.1.0 (built without CUDA)'\n")
    ppbench.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    run = subprocess.run([make, "-n", "-C", str(ROOT), target, f"PPBENCH={ppbench}"],
                         env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout


def written_paths(text: str) -> list[str]:
    """Every path a dry run's commands would write: after --out/--out-dir/--trace-out/--html,
    mkdir -p."""
    paths = []
    for line in text.splitlines():
        words = line.replace(";", " ").split()
        for i, word in enumerate(words[:-1]):
            if word in WRITE_FLAGS or (word == "-p" and i and words[i - 1] == "mkdir"):
                paths.append(words[i + 1].strip("'\""))
        # shell variables that hold them: trace=plots/latest/traces/$name.json
        paths += [m.group(1) for m in re.finditer(r"\btrace=(\S+?);", line)]
    # a shell variable is checked where it is set (above); absolute paths are the test's own
    return [p for p in paths if not p.startswith(("/", "$"))]


@pytest.mark.parametrize("target", ["bench", "plots", "report", "bench-mpi", "bench-link"])
def test_make_bench_writes_only_git_ignored_files(tmp_path, target):
    text = dry_run(target, tmp_path)
    paths = written_paths(text)
    if target == "bench":
        assert any(p.startswith("results/latest/theory") for p in paths)
        assert any(p.startswith("results/latest/cpu") for p in paths)
        assert "--summarize" in text
    if target == "bench-mpi":
        assert "benchmarks/mpi_transport.py" in text
        assert "results/latest/mpi_transport.json" in paths
    if target == "bench-link":
        assert "benchmarks/allreduce_link.py" in text
        assert "results/latest/allreduce_link.json" in paths
        assert "benchmarks/pipeline_link.py" in text
        assert "results/latest/pipeline_link.json" in paths
    assert paths, text
    for path in paths:
        assert path.startswith(("results/latest/", "plots/latest")), path
        # (a path below it: a folder that does not exist yet matches no folder-only pattern)
        below = path.rstrip("/") + "/x"
        assert git("check-ignore", "-q", "--no-index", below).returncode == 0, \
            f"{path} is not git-ignored"
    tracked = git("ls-files", "results/latest", "plots/latest").stdout.split()
    assert tracked == []


def test_the_report_sets_the_latest_records_beside_the_committed_reference(tmp_path):
    text = dry_run("report", tmp_path)
    # make -n prints the recipe unexpanded by the shell: the reference options are in it
    assert "--reference results/reference/theory.jsonl" in text
    assert "--reference-measured results/reference/cpu.jsonl" in text
    assert "--out results/latest/REPORT.md" in text
    # the same report as one HTML page, figures from this machine's plots first
    assert "--html results/latest/REPORT.html" in text
    assert "--figures plots/latest --figures plots/reference" in text


def test_the_reference_records_are_committed_where_the_report_finds_them():
    tracked = set(git("ls-files", "results", "plots").stdout.split())
    for name in ("theory.jsonl", "theory.csv", "cpu.jsonl", "cpu.csv"):
        assert f"results/reference/{name}" in tracked
        assert f"results/{name}" not in tracked  # not where a sweep writes
    assert "results/REPORT.md" in tracked
    assert any(p.startswith("plots/reference/timeline_") for p in tracked)
    assert not any(re.match(r"plots/[^/]+\.png$", p) for p in tracked)


def test_docs_bench_and_the_readme_paragraph():
    doc = (ROOT / "docs" / "bench.md").read_text()
    for piece in ("results/latest/", "results/reference/", "plots/latest/", "sweep.schema.json",
                  "exit", "130", "143", "Ctrl-C", "resume", "CPU-only", "GPU"):
        assert piece in doc, piece
    readme = (ROOT / "README.md").read_text()
    start = readme.index("`make bench` simulates")
    end = readme.index("\n\n", start)
    paragraph = readme[start:end].strip().splitlines()
    assert len(paragraph) <= 10 and "docs/bench.md" in "\n".join(paragraph)
