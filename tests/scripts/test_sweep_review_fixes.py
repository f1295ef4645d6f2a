"""Bad inputs around a sweep and its report that once gave a traceback, a hang or a quiet wrong
answer: a spec that multiplies to billions of points, records with lists or NaN where a value
belongs, an --out that names no file, a FIFO or device as an input, a folder where an output
goes, a ppbench-mpi missing beside ppbench, a --cost no record has, --only selections that
share no value. Each is one line and exit 2 (or the line set aside), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import results_io
import script_cli
import sweep
import sweep_process
import sweep_records
import sweep_spec
from conftest import SCRIPTS, calls, result_row, write_jsonl

GOOD = {"schedule": ["gpipe", "1f1b"], "devices": 2, "microbatches": [2, 4]}


def write_spec(path: Path, runs: list) -> Path:
    path.write_text(json.dumps({"name": "t", "runs": runs}))
    return path


def run_script(name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def one_line_exit_2(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


# --- 1: a group that multiplies to too many points ---------------------------------------------

def test_a_group_over_the_point_cap_is_refused_before_it_is_expanded(monkeypatch):
    monkeypatch.setattr(sweep_spec, "MAX_GROUP_POINTS", 3)
    with pytest.raises(ValueError, match=r"runs\[0\] \(\"big\"\): its lists multiply to 4 "
                                         r"points; allowed: at most 3"):
        sweep_spec.expand_spec({"runs": [{**GOOD, "name": "big"}]})
    assert len(sweep_spec.expand_spec({"runs": [{**GOOD, "microbatches": [2, 4, 8][:1]}]})) == 2


def test_an_enormous_spec_is_one_line_and_exit_2(tmp_path, fake_ppbench):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{
        "name": "huge", "schedule": ["gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe"],
        "devices": list(range(1, 201)), "microbatches": list(range(1, 1001)),
        "comm": list(range(100)), "cost": ["F=1,B=2", "F=1,B=3"]}])
    line = one_line_exit_2(run_script("sweep.py", str(spec), "--ppbench", binary, "--out",
                                      str(tmp_path / "out")))
    assert 'runs[0] ("huge"): its lists multiply to 200,000,000 points' in line
    assert "1,000,000" in line and calls(log) == []


# --- 2 and 5: records with a list, an object or NaN where a value belongs ----------------------

def test_records_with_a_list_or_an_object_in_the_point_are_set_aside(tmp_path):
    good = {"sweep": "t", "status": "ok", "recorded_by": {"host": "h"},
            "point": {"schedule": "gpipe", "devices": 2, "microbatches": 2}}
    bad = [{**good, "point": {**good["point"], "devices": [2]}},
           {**good, "point": {**good["point"], "schedule": {"a": 1}}},
           {**good, "point": {**good["point"], "command": ["run"]}}]
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [good, *bad]))
    records = sweep_records.Records(tmp_path / "out", {"host": "h"})
    assert len(records.rows) == 1 and len(records.others) == 3
    records.settle()
    assert len((tmp_path / "out.previous.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("comm, written", [({"a": 1}, "{'a': 1}"), ("x", "x"), (True, "True"),
                                           (0.5, "0.5")])
def test_a_top_level_comm_of_another_shape_is_written_as_it_is(comm, written):
    row = {"status": "ok", "comm": comm,
           "point": {"schedule": "gpipe", "devices": 2, "microbatches": 2}}
    assert str(sweep_records.csv_row(row)["comm"]) == written


def test_a_record_with_nan_is_set_aside_with_a_warning_naming_the_nan(tmp_path, capsys):
    point = {"schedule": "gpipe", "devices": 2, "microbatches": 2}
    (tmp_path / "out.jsonl").write_text(
        '{"status": "ok", "bubble_fraction": NaN, "recorded_by": {"host": "h"}, '
        f'"point": {json.dumps(point)}}}\n')
    records = sweep_records.Records(tmp_path / "out", {"host": "h"})
    assert records.rows == {} and len(records.others) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'out.jsonl'}:1: NaN is not a JSON number" in err and "set aside" in err


def test_a_torn_record_is_set_aside_as_not_json(tmp_path, capsys):
    (tmp_path / "out.jsonl").write_text('{"status": "ok", "poi\n')
    records = sweep_records.Records(tmp_path / "out", {"host": "h"})
    assert records.rows == {} and len(records.others) == 1
    assert f"{tmp_path / 'out.jsonl'}:1: not JSON, set aside" in capsys.readouterr().err


def test_rewrite_jsonl_refuses_nan_and_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"a":1}\n')
    with pytest.raises(ValueError):
        results_io.rewrite_jsonl(path, [{"a": float("nan")}])
    assert path.read_text() == '{"a":1}\n'


# --- 3: an --out that names no file -----------------------------------------------------------

@pytest.mark.parametrize("out", ["", ".", "/", "..", "d/", "d/.", "d/.."])
def test_an_out_prefix_without_a_name_is_one_line_and_exit_2(tmp_path, fake_ppbench, out):
    binary, log = fake_ppbench
    (tmp_path / "d").mkdir()
    spec = write_spec(tmp_path / "s.json", [GOOD])
    run = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                          binary, "--out", out], capture_output=True, text=True, cwd=tmp_path,
                         timeout=60, check=False)
    line = one_line_exit_2(run)
    assert f"'{out}' is not a prefix" in line and calls(log) == []
    assert not list(tmp_path.glob("*.jsonl")) and not list(tmp_path.parent.glob("*.jsonl"))


# --- 4: a FIFO, a device or an oversized file as an input --------------------------------------

def test_a_fifo_or_a_device_as_the_spec_is_refused_without_blocking(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    for spec in (fifo, Path("/dev/zero")):
        line = one_line_exit_2(run_script("sweep.py", str(spec), "--ppbench", binary, "--out",
                                          str(tmp_path / "out")))
        assert line == (f"sweep: spec {spec}: not a regular file (a FIFO, socket or device); "
                        f"allowed: a regular file")


def test_a_fifo_as_the_records_of_the_report_is_refused(tmp_path):
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    line = one_line_exit_2(run_script("report.py", str(fifo), "--out", str(tmp_path / "r.md")))
    assert "not a regular file" in line


def test_a_file_over_the_cap_is_refused(tmp_path):
    path = tmp_path / "big.json"
    path.write_text("12345")
    assert script_cli.read_text(path, "spec", 5) == "12345"
    with pytest.raises(script_cli.InputError, match="over 4 bytes; allowed: at most 4 bytes"):
        script_cli.read_text(path, "spec", 4)
    assert sweep_spec.MAX_SPEC_BYTES == 64 << 20


# --- 6: a folder where an output of PREFIX goes ------------------------------------------------

@pytest.mark.parametrize("suffix", [s for s in sweep_records.OUTPUT_SUFFIXES if s != ".jsonl"])
def test_a_folder_in_place_of_an_output_is_exit_2_before_work(tmp_path, fake_ppbench, suffix):
    binary, log = fake_ppbench
    (tmp_path / f"out{suffix}").mkdir()
    spec = write_spec(tmp_path / "s.json", [GOOD])
    line = one_line_exit_2(run_script("sweep.py", str(spec), "--ppbench", binary, "--out",
                                      str(tmp_path / "out")))
    assert line == f"sweep: --out {tmp_path}/out{suffix}: is a folder; give a file name"
    assert calls(log, probes=True) == [] and not (tmp_path / "out.jsonl").exists()


# --- 8: ppbench-mpi missing beside ppbench ----------------------------------------------------

def test_a_ppbench_without_ppbench_mpi_beside_it_is_told_to_copy_it(tmp_path, fake_ppbench,
                                                                    fake_mpirun, monkeypatch):
    binary, _ = fake_ppbench
    monkeypatch.setattr(sweep_process, "version_lines", lambda program: [
        "ppbench 0.1.0", "MPI: ppbench-mpi, which runs each process of mpirun -np P ppbench "
        "run ..., is missing beside this ppbench: copy it here"])
    spec = write_spec(tmp_path / "s.json", [{
        "command": "run", "workload": "mlp", "schedule": "1f1b", "devices": 2,
        "microbatches": 4, "launcher": "mpirun"}])
    with pytest.raises(sweep_spec.MachineError) as caught:
        sweep.run_sweep(spec, binary, tmp_path / "out")
    assert f"{Path(binary).with_name('ppbench-mpi')} is missing: copy ppbench-mpi" \
        in str(caught.value)
    assert "built with MPI" not in str(caught.value)


# --- 9: a --cost no record has; --only selections that share no value --------------------------

def test_a_cost_no_record_has_is_refused_naming_the_costs_present(tmp_path):
    records = write_jsonl(tmp_path / "r.jsonl", [result_row("gpipe", 4, 8, 0.27, 0.27)])
    out = tmp_path / "r.md"
    line = one_line_exit_2(run_script("report.py", str(records), "--out", str(out), "--cost",
                                      "F=1,B=3"))
    assert line == ("report: --cost F=1,B=3: no record has it; allowed: the costs of the "
                    "records, F=1,B=2")
    assert not out.exists()
    assert run_script("report.py", str(records), "--out", str(out), "--cost",
                      "F=1,B=2").returncode == 0


def test_only_selections_that_share_no_value_are_named(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    line = one_line_exit_2(run_script("sweep.py", str(spec), "--ppbench", binary, "--out",
                                      str(tmp_path / "out"), "--only", "microbatches=2",
                                      "--only", "microbatches=4"))
    assert "--only 'microbatches=2' and --only 'microbatches=4' share no value" in line
    assert sweep_spec.parse_only(["devices=1,2", "devices=2,3"]) == {"devices": {2}}
