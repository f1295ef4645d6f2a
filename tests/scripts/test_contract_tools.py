"""The command-line contract (scripts/script_cli.py) of the sweep, the fuzzers, the reference-order
tools and the benchmarks: each bad input below is one line on stderr naming it, with its exit
status, no traceback, and nothing written where nothing should be. Every case is refused before
any long work (no sweep point, no measurement, no mpirun) is started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    # A program that answers every command with a JSON array: not ppbench's record.
    (tmp_path / "array-printer").write_text("#!/bin/sh\necho '[1]'\n")
    (tmp_path / "array-printer").chmod(0o755)
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
    ("scripts/sweep.py", ["{t}/spec.json", "--out", "/proc/no-such/o", "--ppbench", PPBENCH], 2,
     "--out /proc/no-such/o.jsonl: cannot write there"),
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
    ("scripts/tune_speed.py", ["{t}/array-printer", "--runs", "1"], 1,
     "printed no record with a list of candidates"),
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
    ("benchmarks/cli_speed.py", ["--ppbench", "{t}/array-printer", "--repeats", "1", "--out",
                                 "{t}/speed.json"], 1, "printed a JSON list, not a record"),
    ("benchmarks/py_simulator.py", ["0", "0"], 2, "0 is out of range"),
    ("benchmarks/py_simulator.py", ["-1", "4"], 2, "-1 is out of range"),
    ("benchmarks/py_simulator.py", ["2", "0"], 2, "0 is out of range"),
    ("benchmarks/py_simulator.py", ["2", "4", "--f", "nan"], 2, "'nan' is not a finite"),
    ("benchmarks/py_simulator.py", ["2", "4", "--f", "-1"], 2, "-1 is out of range"),
    ("benchmarks/link_probe.py", [], 2, "the following arguments are required: mode"),
    ("benchmarks/link_probe.py", ["ping", "127.0.0.1", "abc"], 2, "'abc' is not a whole"),
    ("benchmarks/link_probe.py", ["ping", "a" * 70, "1"], 2, "not a host name or address"),
    ("benchmarks/link_probe.py", ["duplex", "127.0.0.1", "127.0.0.1", "0"], 2,
     "0 is out of range"),
    ("benchmarks/mpi_transport.py", ["--out", "/proc/no-such/o.json"], 2, "cannot write there"),
    ("benchmarks/allreduce_link.py", ["--out", "{t}/folder"], 2, "is a folder"),
    ("benchmarks/pipeline_link.py", ["--out", "/proc/no-such/o.json"], 2, "cannot write there"),
    ("benchmarks/pipeline_link.py", ["--width", "8"], 2, "must be 16 to 4096"),
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


def test_a_summary_of_another_shape_reads_as_none_and_says_so(files: Path):
    (files / "latin.summary.json").write_bytes(b"\xff{}")
    done = run_script("scripts/sweep.py", "--summarize", str(files / "listed"),
                      str(files / "latin"), str(files / "absent"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    # The file is there: "no <file>" would send whoever reads it looking for the wrong thing.
    assert f"listed: not run ({files}/listed.summary.json is not a summary this sweep wrote)" \
        in done.stdout
    assert f"latin: not run ({files}/latin.summary.json is not a summary" in done.stdout
    assert f"absent: not run (no {files}/absent.summary.json)" in done.stdout


# --- the sweep's records: what another tool or a hand wrote into PREFIX.jsonl ---------------

ODD_LINES = [
    '{"recorded_by": {"host": ["a", "list"]}}',                  # an unhashable identity
    json.dumps({**SPEC["runs"][0], "schedule": "1f1b", "devices": 2, "microbatches": 2,
                "cost": "F=1,B=2", "comm": 0, "recorded_by": {"cpu": {"an": "object"}}}),
    "[" * 100000 + "]" * 100000,                                  # nested past the parser
]


def test_odd_records_are_set_aside_not_a_traceback(tmp_path: Path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    records = tmp_path / "out.jsonl"
    records.write_text("".join(line + "\n" for line in ODD_LINES))
    done = run_script("scripts/sweep.py", str(spec), "--out", str(tmp_path / "out"),
                      "--ppbench", binary)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # No record lost: each odd line is kept, byte for byte, beside the sweep's own.
    assert (tmp_path / "out.previous.jsonl").read_text().splitlines() == ODD_LINES
    assert len(records.read_text().splitlines()) == 2


def test_a_kept_record_with_odd_fields_still_gives_its_csv(tmp_path: Path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    args = [str(spec), "--out", str(tmp_path / "out"), "--ppbench", binary]
    assert run_script("scripts/sweep.py", *args).returncode == 0
    records = tmp_path / "out.jsonl"
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    # This machine's and build's record, edited: fields the CSV reads are of another type.
    rows[0].update({"closed_form": [1], "provenance": "by hand", "gpu": {"sms_per_rank": 5}})
    rows[1]["status"] = "error"  # so that the sweep runs it again and rewrites the CSV
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = run_script("scripts/sweep.py", *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    csv_lines = (tmp_path / "out.csv").read_text().splitlines()
    assert len(csv_lines) == 3 and csv_lines[1].startswith("1f1b,2,2,")


# --- torch_pipelining_cpu: what it checks once PyTorch imports (a stand-in torch here) ------

def run_with_torch(tmp_path: Path, torch_init: str, *args: str) -> subprocess.CompletedProcess:
    """torch_pipelining_cpu.py with a stand-in `torch` package first on the import path."""
    (tmp_path / "torch").mkdir(exist_ok=True)
    (tmp_path / "torch" / "__init__.py").write_text(torch_init)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    env.pop("PPBENCH_TRACEBACK", None)
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "torch_pipelining_cpu.py"),
                           *args], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
                          check=False)


TORCH_CASES = [
    # PyTorch missing: the machine's (exit 3), after the arguments were checked.
    ('raise ImportError("no torch here")', [], 3, "needs the Python module 'torch'"),
    # A ppbench that is a folder: named before any run, not an OSError's exit 3.
    ('__version__ = "0"', ["--ppbench", "{t}/folder"], 2, "not an executable ppbench"),
    # ppbench's run fails: one line and exit 1, not CalledProcessError's traceback.
    ('__version__ = "0"', ["--ppbench", "/bin/false", "--repeats", "1", "--schedules", "gpipe",
                           "--out", "{t}/torch.json"], 1, "exited 1"),
]


@pytest.mark.parametrize("torch_init,args,status,words", TORCH_CASES,
                         ids=["no-torch", "ppbench-folder", "ppbench-fails"])
def test_torch_pipelining_cpu_fails_in_one_line(tmp_path: Path, torch_init: str,
                                                args: list[str], status: int, words: str):
    (tmp_path / "folder").mkdir()
    done = run_with_torch(tmp_path, torch_init, *[a.replace("{t}", str(tmp_path)) for a in args])
    assert done.returncode == status, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "torch.json").exists()
