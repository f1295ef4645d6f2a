"""The command-line contract (scripts/script_cli.py) of the sweep, the fuzzers, the reference-order
tools and the benchmarks: each bad input below is one line on stderr naming it, with its exit
status, no traceback, and nothing written where nothing should be. Every case is refused before
any long work (no sweep point, no measurement, no mpirun) is started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT
from test_script_contract import run_script

PPBENCH = str(ROOT / "build" / "ppbench")
SPEC = {"name": "t", "runs": [{"schedule": ["1f1b"], "devices": [2], "microbatches": [2, 4],
                               "cost": ["F=1,B=2"], "comm": [0]}]}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """Inputs of every wrong kind, under tmp_path."""
    (tmp_path / "latin1.txt").write_bytes(b"\xff\xfe{}\n")
    (tmp_path / "broken.py").write_text("def (\n")
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    (tmp_path / "old.jsonl").write_bytes(b"\xff\xfe\n")
    (tmp_path / "listed.summary.json").write_text("[1]")
    (tmp_path / "folder").mkdir()
    return tmp_path


# (script, arguments with {t} for the folder of inputs, exit status, words of the one line)
CASES = [
    # the sweep
    ("scripts/sweep.py", ["{t}/latin1.txt", "--out", "{t}/o"], 2, "not UTF-8 text"),
    ("scripts/sweep.py", ["{t}/deep.json", "--out", "{t}/o"], 2, "nested too deep"),
    ("scripts/sweep.py", ["{t}/spec.json", "--out", "{t}/old", "--ppbench", PPBENCH], 2,
     "old.jsonl: not UTF-8 text"),
    ("scripts/sweep.py", ["{t}/spec.json", "--out", "{t}/o", "--timeout", "1e12"], 2,
     "up to 604800"),
    # the fuzzers
    ("scripts/fuzz_cli.py", [PPBENCH, "--cases", "1", "--command"], 2,
     "--command: expected at least one argument"),
    ("scripts/fuzz_cli.py", [PPBENCH, "--timeout", "nan"], 2, "'nan' is not a finite number"),
    ("scripts/fuzz_cli.py", [PPBENCH, "--cases", "0"], 2, "0 is out of range (allowed: >= 1)"),
    ("scripts/fuzz_cli.py", ["{t}/folder"], 2, "not an executable program"),
    ("scripts/explore_runs.py", [PPBENCH, "--timeout", "nan"], 2,
     "'nan' is not a finite number"),
    # tools around ppbench
    ("scripts/tune_speed.py", ["--runs", "0"], 2, "0 is out of range"),
    ("scripts/tune_speed.py", ["--runs", "-1"], 2, "-1 is out of range"),
    ("scripts/tune_speed.py", ["{t}/none"], 2, "is not a program"),
    ("scripts/tune_speed.py", ["/bin/false", "--runs", "1"], 1, "exit 1"),
    # the reference-order tools: the reference's own file
    ("scripts/zb_auto_reference.py", ["{t}/none.py", "--devices", "2", "--microbatches", "4",
                                      "--memory-limit", "4"], 2, "no such file"),
    ("scripts/zb_auto_reference.py", ["{t}/latin1.txt", "--devices", "2", "--microbatches", "4",
                                      "--memory-limit", "4"], 2, "not UTF-8 text"),
    ("scripts/zb_auto_reference.py", ["{t}/broken.py", "--devices", "2", "--microbatches", "4",
                                      "--memory-limit", "4"], 2, "SyntaxError"),
    ("scripts/zb_auto_reference.py", ["{t}/empty.py", "--devices", "2", "--microbatches", "4",
                                      "--memory-limit", "4"], 2, "not of the shape expected"),
    ("scripts/zb_auto_reference.py", ["{t}/empty.py", "--devices", "2", "--microbatches", "4",
                                      "--memory-limit", "4", "--cost", "F=abc"], 2,
     "'abc' is not a number"),
    ("scripts/zb_auto_reference.py", ["{t}/empty.py", "--devices", "2", "--microbatches", "4",
                                      "--memory-limit", "4", "--cost", "X=1"], 2,
     "unknown key 'X'"),
    ("scripts/v_memory_reference_orders.py", ["--ref", "{t}/none.py", "half", "2", "4"], 2,
     "no such file"),
    ("scripts/v_memory_reference_orders.py", ["--ref", "{t}/latin1.txt", "half", "2", "4"], 2,
     "not UTF-8 text"),
    ("scripts/v_memory_reference_orders.py", ["--ref", "{t}/broken.py", "half", "2", "4"], 2,
     "SyntaxError"),
    ("scripts/v_memory_reference_orders.py", ["--ref", "{t}/empty.py", "half", "2", "4"], 2,
     "defines no PipelineGraph"),
    ("scripts/v_memory_reference_orders.py", ["--ref", "{t}/empty.py", "half", "0", "4"], 2,
     "0 is out of range"),
    # benchmarks: their options and outputs, checked before any measurement
    ("benchmarks/cli_speed.py", ["--ppbench", "{t}/folder"], 2, "not an executable ppbench"),
    ("benchmarks/cli_speed.py", ["--ppbench", "/bin/true", "--repeats", "1"], 1,
     "printed no JSON record"),
    ("benchmarks/cli_speed.py", ["--out", "/proc/no-such/o.json"], 2, "cannot write there"),
    ("benchmarks/py_simulator.py", ["0", "0"], 2, "0 is out of range"),
    ("benchmarks/py_simulator.py", ["-1", "4"], 2, "-1 is out of range"),
    ("benchmarks/py_simulator.py", ["2", "0"], 2, "0 is out of range"),
    ("benchmarks/py_simulator.py", ["2", "4", "--f", "nan"], 2, "'nan' is not a finite"),
    ("benchmarks/py_simulator.py", ["2", "4", "--f", "-1"], 2, "-1 is out of range"),
    ("benchmarks/link_probe.py", [], 2, "the following arguments are required: mode"),
    ("benchmarks/link_probe.py", ["ping", "127.0.0.1", "abc"], 2, "'abc' is not a whole"),
    ("benchmarks/mpi_transport.py", ["--out", "/proc/no-such/o.json"], 2, "cannot write there"),
    ("benchmarks/allreduce_link.py", ["--out", "{t}/folder"], 2, "is a folder"),
    ("benchmarks/torch_pipelining_cpu.py", ["--out", "/proc/no-such/o.json"], 2,
     "cannot write there"),
    ("benchmarks/torch_pipelining_cpu.py", ["--schedules", "gpipe,bogus"], 2,
     "--schedules: bogus"),
]


@pytest.mark.parametrize("script,args,status,words", CASES,
                         ids=[f"{c[0].split('/')[1]}:{' '.join(c[1])[:40]}" for c in CASES])
def test_a_bad_input_is_one_line_and_its_status(files: Path, script: str, args: list[str],
                                                status: int, words: str):
    def made() -> list[str]:  # a sweep's lock file stays between sweeps, by design
        return sorted(p.name for p in files.iterdir() if p.suffix != ".lock")
    before = made()
    done = run_script(script, *[a.replace("{t}", str(files)) for a in args])
    assert done.returncode == status, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    # Refused before anything was made: no records, no output folder, no temp file.
    assert made() == before


def test_a_summary_of_another_shape_reads_as_none(files: Path):
    done = run_script("scripts/sweep.py", "--summarize", str(files / "listed"))
    assert done.returncode == 0, done.stderr
    assert "listed: not run" in done.stdout
