"""The provenance readers scripts share (scripts/results_io.py: load_average, git_commit): what
they record, and that no script or benchmark driver reads the commit or the load by itself."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from results_io import git_commit, load_average

ROOT = Path(__file__).resolve().parents[2]


def test_load_average_unrounded_and_rounded(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (1.23456, 0.5, 2.0))
    assert load_average() == [1.23456, 0.5, 2.0]
    assert load_average(2) == [1.23, 0.5, 2.0]
    assert isinstance(load_average(), list)  # JSON-ready, as the records always had it


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    if subprocess.run(["git", "--version"], capture_output=True, check=False).returncode != 0:
        pytest.skip("no git here")
    repo = tmp_path / "repo"
    (repo / "results").mkdir(parents=True)
    (repo / "code.txt").write_text("a\n")
    (repo / "results" / "r.json").write_text("{}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "x")
    return repo


def test_git_commit_clean_dirty_and_results_only(repo, monkeypatch):
    monkeypatch.setenv("PPBENCH_GIT_COMMIT", "from-env")
    head = _git(repo, "rev-parse", "HEAD")[:12]
    assert git_commit(repo) == head
    # A record written under results/ does not make the measured code dirty...
    (repo / "results" / "r.json").write_text("{\"new\": 1}\n")
    (repo / "untracked.txt").write_text("not tracked\n")
    assert git_commit(repo) == head
    # ...a changed tracked source does.
    (repo / "code.txt").write_text("b\n")
    assert git_commit(repo) == head + "-dirty"


def test_git_commit_without_git_falls_back_to_the_environment(tmp_path, monkeypatch):
    plain = tmp_path / "copy"  # a copy without .git, as a lent machine gets
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.setenv("PPBENCH_GIT_COMMIT", "0123456789ab")
    assert git_commit(plain) == "0123456789ab"
    monkeypatch.delenv("PPBENCH_GIT_COMMIT")
    assert git_commit(plain) == "unknown"


def test_one_home_for_the_commit_and_load_readers():
    """A second reader would record the same thing differently (rounded or not, -dirty or not)
    the day one of them changes."""
    pattern = re.compile(r"getloadavg|/proc/loadavg|rev-parse")
    home = ROOT / "scripts" / "results_io.py"
    readers = [str(p.relative_to(ROOT))
               for p in sorted([*(ROOT / "scripts").glob("*.py"),
                                *(ROOT / "benchmarks").glob("*.py")])
               if p != home and pattern.search(p.read_text(encoding="utf-8"))]
    assert readers == []
    assert pattern.search(home.read_text(encoding="utf-8"))
