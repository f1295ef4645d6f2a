"""Tests of scripts/sweep.py against the fake ppbench."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import results_io
import sweep
import sweep_point
import sweep_process
import sweep_records
import sweep_spec
from conftest import SCRIPTS, calls


def write_spec(path: Path, runs: list[dict], name: str = "t") -> Path:
    path.write_text(json.dumps({"name": name, "runs": runs}))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_expand_spec_passes_chunks_only_to_interleaved():
    points = sweep_spec.expand_spec({"runs": [{"schedule": ["1f1b", "interleaved-1f1b"],
                                               "devices": [2], "microbatches": [4, 8],
                                               "chunks": [2, 4]}]})
    assert len(points) == 2 + 4  # 1f1b ignores chunks, so its two chunk values collapse
    for p in points:
        argv = p.argv()
        assert ("--chunks" in argv) == (p.schedule == "interleaved-1f1b")
        assert argv[-2:] == ["--format", "json"]


def test_expand_spec_passes_group_size_only_to_interleaved_1f1b():
    points = sweep_spec.expand_spec({"runs": [{"schedule": ["looped-bfs", "interleaved-zb",
                                                            "interleaved-1f1b"],
                                               "devices": [2], "microbatches": [4], "chunks": [3],
                                               "group_size": [4]}]})
    assert len(points) == 3
    for p in points:
        argv = p.argv()
        assert argv[argv.index("--chunks") + 1] == "3"
        assert ("--group-size" in argv) == (p.schedule == "interleaved-1f1b"), argv


def test_expand_spec_dedupes_across_groups_and_accepts_scalars():
    spec = {"runs": [{"schedule": "gpipe", "devices": [4], "microbatches": 8},
                     {"schedule": ["gpipe"], "devices": 4, "microbatches": [8, 16]}]}
    assert [(p.schedule, p.microbatches) for p in sweep_spec.expand_spec(spec)] == [
        ("gpipe", 8), ("gpipe", 16)]


def test_expand_spec_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown keys"):
        sweep_spec.expand_spec({"runs": [{"schedule": "gpipe", "devices": 2, "microbatches": 2,
                                          "micro_batches": 3}]})


def test_sweep_records_ok_invalid_and_error_rows(tmp_path, fake_ppbench):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [
        {"schedule": ["1f1b", "crash"], "devices": [4], "microbatches": [2, 8],
         "cost": ["F=1,B=2"], "comm": [0]}])
    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts == {"ok": 1, "invalid": 1, "error": 2, "skipped": 0}
    rows = {(r["schedule"], r["microbatches"]): r for r in read_jsonl(tmp_path / "out.jsonl")}
    ok = rows[("1f1b", 8)]
    assert ok["status"] == "ok" and ok["sweep"] == "t"
    assert ok["bubble_fraction"] == pytest.approx(3 / 11)
    assert ok["cost"] == "F=1,B=2" and ok["comm"] == 0
    invalid = rows[("1f1b", 2)]
    assert invalid["status"] == "invalid"
    assert invalid["error"] == "invalid parameters: 1f1b needs N >= D (got D=4, N=2)"
    assert invalid["devices"] == 4 and invalid["cost"] == "F=1,B=2"
    assert rows[("crash", 8)]["status"] == "error"
    assert "Segmentation fault" in rows[("crash", 8)]["error"]
    assert ["--cost", "F=1,B=2"] == calls(log)[0][7:9]


def test_sweep_skips_recorded_points_and_retries_errors(tmp_path, fake_ppbench):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [
        {"schedule": ["gpipe", "1f1b", "crash"], "devices": [2, 4], "microbatches": [1, 4]}])
    sweep.run_sweep(spec, binary, tmp_path / "out")
    assert len(calls(log)) == 12
    first = (tmp_path / "out.jsonl").read_text()

    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts["skipped"] == 8 and counts["error"] == 4  # only the 'crash' rows re-run
    assert len(calls(log)) == 12 + 4
    assert len(read_jsonl(tmp_path / "out.jsonl")) == 12  # replaced, not appended twice
    assert (tmp_path / "out.jsonl").read_text().splitlines()[0] == first.splitlines()[0]


def test_sweep_extends_existing_file_and_force_reruns(tmp_path, fake_ppbench):
    binary, log = fake_ppbench
    small = write_spec(tmp_path / "a.json", [{"schedule": "gpipe", "devices": 2,
                                              "microbatches": [2]}])
    big = write_spec(tmp_path / "b.json", [{"schedule": "gpipe", "devices": 2,
                                            "microbatches": [2, 4, 8]}])
    sweep.run_sweep(small, binary, tmp_path / "out")
    counts = sweep.run_sweep(big, binary, tmp_path / "out")
    assert counts["skipped"] == 1 and counts["ok"] == 2
    assert len(calls(log)) == 3
    sweep.run_sweep(big, binary, tmp_path / "out", force=True)
    assert len(calls(log)) == 6
    assert [r["microbatches"] for r in read_jsonl(tmp_path / "out.jsonl")] == [2, 4, 8]


def test_a_failed_force_rerun_leaves_the_measured_row_standing(tmp_path, fake_ppbench,
                                                               monkeypatch, capsys):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{"schedule": "gpipe", "devices": 2,
                                             "microbatches": [2, 3]}])
    sweep.run_sweep(spec, binary, tmp_path / "out")
    measured = read_jsonl(tmp_path / "out.jsonl")
    csv_before = (tmp_path / "out.csv").read_text()
    monkeypatch.setenv("FAKE_PPBENCH_CRASH", "gpipe")
    counts = sweep.run_sweep(spec, binary, tmp_path / "out", force=True)
    assert counts["error"] == 2
    assert read_jsonl(tmp_path / "out.jsonl") == measured
    assert (tmp_path / "out.csv").read_text() == csv_before
    failed = read_jsonl(tmp_path / "out.previous.jsonl")
    assert [(r["microbatches"], r["status"]) for r in failed] == [(2, "error"), (3, "error")]
    assert "the recorded ok row stands" in capsys.readouterr().out
    # an error row of a point with no measurement stands, and is retried by the next sweep
    point = sweep_spec.expand_spec({"runs": [{"schedule": "gpipe", "devices": 2,
                                              "microbatches": 5}]})[0]
    records = sweep_records.Records(tmp_path / "out", measured[0]["recorded_by"])
    assert records.put(point, {**failed[0], "microbatches": 5})
    assert records.status(point) == "error"


def test_csv_has_flat_columns_for_every_row(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{"schedule": ["gpipe", "1f1b"], "devices": [4],
                                             "microbatches": [2, 8], "cost": ["F=1,B=2"]}])
    sweep.run_sweep(spec, binary, tmp_path / "out")
    with open(tmp_path / "out.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == sweep_records.CSV_COLUMNS
        rows = list(reader)
    assert len(rows) == 4
    gpipe8 = next(r for r in rows if r["schedule"] == "gpipe" and r["microbatches"] == "8")
    assert float(gpipe8["bubble_fraction"]) == pytest.approx(3 / 11)
    assert float(gpipe8["closed_form_bubble_fraction"]) == pytest.approx(3 / 11)
    assert gpipe8["git_commit"] == "fake123" and gpipe8["cost"] == "F=1,B=2"
    invalid = next(r for r in rows if r["schedule"] == "1f1b" and r["microbatches"] == "2")
    assert invalid["status"] == "invalid" and invalid["makespan"] == ""
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_atomic_write_leaves_old_file_when_replace_fails(tmp_path, monkeypatch):
    target = tmp_path / "out.csv"
    target.write_text("old\n")

    def broken_replace(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        results_io.atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_unparseable_output_is_an_error_row(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{"schedule": "garbage", "devices": 2,
                                             "microbatches": 2}])
    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts["error"] == 1
    assert "unparseable" in read_jsonl(tmp_path / "out.jsonl")[0]["error"]


def test_cli_prints_progress_and_help(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{"schedule": "1f1b", "devices": 4,
                                             "microbatches": [8]}], name="demo")
    run = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                          binary, "--out", str(tmp_path / "res")], capture_output=True,
                         text=True, check=True)
    assert "[1/1] 1f1b D=4 N=8 ... bubble 0.2727" in run.stdout
    assert "1 ok, 0 invalid, 0 error, 0 skipped" in run.stdout
    help_text = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert "--force" in help_text and "PREFIX.jsonl" in help_text


def test_bad_spec_exits_2(tmp_path):
    spec = tmp_path / "bad.json"
    spec.write_text("{}")
    assert sweep.main([str(spec), "--out", str(tmp_path / "x")]) == 2


def test_theory_spec_is_valid_and_covers_the_reference_points():
    spec = json.loads((SCRIPTS.parent / "benchmarks/sweeps/theory.json").read_text())
    keys = {(p.schedule, p.devices, p.microbatches, p.chunks, p.cost)
            for p in sweep_spec.expand_spec(spec)}
    for schedule in ("naive", "gpipe", "1f1b", "chimera", "zb-h1", "zb-h2", "zb-v", "dualpipe",
                     "dualpipev"):
        for d in (2, 4, 8):
            assert (schedule, d, 64, 1, "F=1,B=2") in keys
    assert ("interleaved-1f1b", 8, 64, 4, "F=1,B=2") in keys
    assert ("zb-v", 4, 16, 1, "F=1,I=1,W=1") in keys
    assert ("dualpipev", 4, 32, 1, "F=1,B=2") in keys


def test_atomic_write_keeps_usual_permissions(tmp_path):
    target = tmp_path / "new.txt"
    results_io.atomic_write(target, "x\n")
    assert target.stat().st_mode & 0o777 == results_io.file_mode(tmp_path / "absent")
    target.chmod(0o640)
    results_io.atomic_write(target, "y\n")
    assert target.stat().st_mode & 0o777 == 0o640 and target.read_text() == "y\n"


# --- run points (`ppbench run`) -------------------------------------------------------------

RUN_GROUP = {"command": "run", "workload": ["mlp"], "workload_flags": ["--layers 4  --width 64"],
             "schedule": ["gpipe", "1f1b"], "devices": [1, 2, 4], "microbatches": [2, 8],
             "microbatch_size": 8, "steps": [3], "warmup": [1], "dtype": ["f32"]}


def test_run_points_carry_workload_flags_and_run_options():
    points = sweep_spec.expand_spec({"runs": [RUN_GROUP]})
    assert len(points) == 2 * 3 * 2
    argv = points[0].argv()
    assert argv[:5] == ["run", "--backend", "cpu", "--workload", "mlp"]
    assert argv[5:9] == ["--layers", "4", "--width", "64"]
    for flag, value in (("--microbatch-size", "8"), ("--steps", "3"), ("--warmup", "1"),
                        ("--dtype", "f32")):
        assert argv[argv.index(flag) + 1] == value
    assert "--cost" not in argv and "--recompute" not in argv
    assert points[0].label().startswith("mlp gpipe D=1 N=2")
    # the closed form comes from `ppbench simulate` of the same schedule point
    assert points[0].closed_form_argv()[:2] == ["simulate", "--schedule"]


def test_run_key_includes_command_and_workload():
    sim = sweep_point.make_point("1f1b", 2, 4)
    mlp = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp",
                                 workload_flags="--width 64")
    mlp_spaced = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp",
                                        workload_flags=" --width  64 ")
    wide = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp",
                                  workload_flags="--width 128")
    llm = sweep_point.make_point("1f1b", 2, 4, command="run", workload="transformer")
    assert len({sim.key(), mlp.key(), wide.key(), llm.key()}) == 4
    assert mlp.key() == mlp_spaced.key()
    # a recorded row maps back to its own key, a simulate row to the simulate key
    assert sweep_records.row_key({"point": mlp.as_dict()}) == mlp.key()
    assert sweep_records.row_key({"point": sim.as_dict()}) == sim.key()


def test_run_groups_reject_simulate_keys_and_need_a_workload():
    with pytest.raises(ValueError, match="unknown keys"):
        sweep_spec.expand_spec({"runs": [{**RUN_GROUP, "cost": "F=1,B=2"}]})
    with pytest.raises(ValueError, match="workload"):
        sweep_spec.expand_spec({"runs": [{k: v for k, v in RUN_GROUP.items() if k != "workload"}]})
    with pytest.raises(ValueError, match="unknown keys"):
        sweep_spec.expand_spec({"runs": [{"schedule": "gpipe", "devices": 2, "microbatches": 2,
                                          "workload": "mlp"}]})  # a simulate group
    with pytest.raises(ValueError, match="unknown command"):
        sweep_spec.expand_spec({"runs": [{**RUN_GROUP, "command": "train"}]})


def test_run_sweep_records_measured_rows_and_run_csv(tmp_path, fake_ppbench):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [RUN_GROUP], name="cpu")
    counts = sweep.run_sweep(spec, binary, tmp_path / "cpu")
    # gpipe: all 6 ok; 1f1b: N=2 < D=4 invalid
    assert counts == {"ok": 11, "invalid": 1, "error": 0, "skipped": 0}
    rows = read_jsonl(tmp_path / "cpu.jsonl")
    ok = next(r for r in rows if r["schedule"] == "1f1b" and r["devices"] == 4
              and r["microbatches"] == 8)
    assert ok["status"] == "ok" and ok["point"]["command"] == "run"
    assert ok["point"]["workload_flags"] == "--layers 4 --width 64"
    assert ok["closed_form"]["bubble_fraction"] == pytest.approx(3 / 11)
    assert "cost" not in ok
    with (tmp_path / "cpu.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == 12
    assert set(sweep_records.RUN_CSV_COLUMNS) == set(table[0])
    row = next(r for r in table if r["schedule"] == "1f1b" and r["devices"] == "4"
               and r["microbatches"] == "8")
    measured = ok["measured"]["bubble_fraction"]
    predicted = ok["predicted"]["bubble_fraction"]
    assert measured != predicted
    assert float(row["measured_bubble_fraction"]) == pytest.approx(measured)
    assert float(row["predicted_bubble_fraction"]) == pytest.approx(predicted)
    assert float(row["bubble_gap"]) == pytest.approx(measured - predicted)
    assert float(row["samples_per_s"]) == pytest.approx(8 * 8 / ok["step_time_s"])
    assert float(row["max_measured_peak_bytes"]) == 4 * 64  # rank 0 holds D activations
    assert float(row["max_model_peak_bytes"]) == 4 * 64
    assert row["workload"] == "mlp" and row["loss"] == "2.5" and row["cpu"] == "Test CPU"
    invalid = next(r for r in table if r["status"] == "invalid")
    assert "N >= D" in invalid["error"] and invalid["measured_bubble_fraction"] == ""
    # run again: everything is recorded, nothing runs
    before = len(calls(log))
    assert sweep.run_sweep(spec, binary, tmp_path / "cpu")["skipped"] == 12
    assert len(calls(log)) == before


def test_run_workload_that_cannot_run_is_invalid(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{**RUN_GROUP, "workload": "broken",
                                             "devices": 2, "microbatches": 2}])
    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts["invalid"] == 2 and counts["ok"] == 0
    assert "does not run" in read_jsonl(tmp_path / "out.jsonl")[0]["error"]


def test_run_timeout_is_an_error_row(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{**RUN_GROUP, "schedule": "slow", "devices": 1,
                                             "microbatches": 1}])
    spec_data = json.loads(spec.read_text())
    spec_data["timeout"] = 0.5  # the spec's timeout applies when --timeout is not given
    spec.write_text(json.dumps(spec_data))
    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts["error"] == 1
    row = read_jsonl(tmp_path / "out.jsonl")[0]
    assert row["status"] == "error" and "timed out after 0.5 s" in row["error"]
    assert row["workload"] == "mlp" and row["point"]["command"] == "run"


def test_mixed_spec_keeps_simulate_csv_and_writes_run_csv(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [
        {"schedule": "1f1b", "devices": 4, "microbatches": 8, "cost": "F=1,B=2"},
        {**RUN_GROUP, "schedule": "1f1b", "devices": 4, "microbatches": 8}])
    counts = sweep.run_sweep(spec, binary, tmp_path / "mix")
    assert counts["ok"] == 2
    with (tmp_path / "mix.csv").open() as f:
        sim = list(csv.DictReader(f))
    with (tmp_path / "mix-run.csv").open() as f:
        run = list(csv.DictReader(f))
    assert list(sim[0]) == list(sweep_records.CSV_COLUMNS) and len(sim) == 1
    assert list(run[0]) == list(sweep_records.RUN_CSV_COLUMNS) and len(run) == 1


def test_run_progress_line(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{**RUN_GROUP, "schedule": "1f1b", "devices": 2,
                                             "microbatches": 4}])
    run = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                          binary, "--out", str(tmp_path / "res")], capture_output=True,
                         text=True, check=True)
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("[1/1]"))
    assert line.startswith("[1/1] mlp 1f1b D=2 N=4 b=8 ... bubble ")
    assert "predicted 0.2000" in line and "samples/s" in line


def test_cpu_spec_covers_every_schedule_device_and_microbatch_count():
    spec = json.loads((SCRIPTS.parent / "benchmarks/sweeps/cpu.json").read_text())
    every = sweep_spec.expand_spec(spec)
    assert all(p.command == "run" for p in every)
    points = [p for p in every if p.launcher is None]
    schedules = {"naive", "gpipe", "1f1b", "interleaved-1f1b", "chimera", "zb-h1", "zb-h2",
                 "zb-v", "dualpipe", "dualpipev"}
    for workload in ("mlp", "transformer", "amoebanet"):
        mine = [p for p in points if p.workload == workload]
        assert {p.schedule for p in mine} == schedules
        assert {(p.devices, p.microbatches) for p in mine} == {
            (d, n) for d in (1, 2, 4) for n in (1, 2, 4, 8, 16, 32)}
        assert {p.chunks for p in mine if p.schedule == "interleaved-1f1b"} == {2}
        assert all(p.steps == 3 and p.warmup == 1 and p.dtype == "f32" for p in mine)
    assert spec.get("timeout")
    # The multi-process points: D = 2 in two processes, and one rank x 2 replicas, never more
    # processes than a 2-core machine has, beside the same mlp points in threads.
    mpi = [p for p in every if p.launcher == "mpirun"]
    assert {(p.devices, p.replicas) for p in mpi} == {(2, 1), (1, 2)}
    assert all(p.processes <= 2 and p.workload == "mlp" for p in mpi)
    threads = {(p.workload, p.workload_flags, p.schedule, p.devices, p.microbatches,
                p.microbatch_size) for p in points}
    assert all((p.workload, p.workload_flags, p.schedule, p.devices, p.microbatches,
                p.microbatch_size) in threads for p in mpi if p.devices == 2)


# --- the GPU sweep (`ppbench run --backend cuda --virtual-devices D`) ----------------------

SCHEDULES = {"naive", "gpipe", "1f1b", "interleaved-1f1b", "chimera", "zb-h1", "zb-h2", "zb-v",
             "dualpipe", "dualpipev"}
GPU_GROUP = {**RUN_GROUP, "backend": "cuda", "virtual_devices": True, "dtype": "bf16",
             "schedule": ["1f1b", "dualpipe"], "devices": [2, 4], "microbatches": [4, 8]}


def gpu_spec() -> dict:
    return json.loads((SCRIPTS.parent / "benchmarks/sweeps/cuda.json").read_text())


def test_gpu_spec_covers_every_schedule_partition_count_and_microbatch_count():
    spec = gpu_spec()
    everything = sweep_spec.expand_spec(spec)
    # The virtual-device groups; the whole-GPU groups (--gpus, mpirun) are checked below.
    points = [p for p in everything if not p.gpus and p.launcher is None]
    assert len(points) == 10 * 4 * 5 * 3
    whole = [p for p in everything if p.gpus or p.launcher is not None]
    assert len(whole) == 2 * 10 * 3 * 5
    assert {p.workload for p in whole} == {"mlp"}
    for p in whole:
        argv = p.argv()
        assert "--virtual-devices" not in argv
        if p.gpus:
            assert argv[argv.index("--gpus") + 1] == ",".join(str(g) for g in range(p.devices))
    for workload in ("mlp", "transformer", "amoebanet"):
        mine = [p for p in points if p.workload == workload]
        assert {p.schedule for p in mine} == SCHEDULES
        assert {(p.schedule, p.devices, p.microbatches) for p in mine} == {
            (s, d, n) for s in SCHEDULES for d in (1, 2, 4, 8) for n in (1, 4, 8, 16, 32)}
        assert {p.chunks for p in mine if p.schedule == "interleaved-1f1b"} == {2}
        assert all(p.steps == 3 and p.warmup == 1 and p.dtype == "bf16" for p in mine)
    for p in points:
        argv = p.argv()
        assert argv[:3] == ["run", "--backend", "cuda"]
        # every D, 1 included, is D green-context partitions of one GPU, one rank each
        assert argv[argv.index("--virtual-devices") + 1] == str(p.devices)
        assert argv[argv.index("--devices") + 1] == str(p.devices)
    transformer = next(p for p in points if p.workload == "transformer")
    assert "--preset llama3-8b" in transformer.workload_flags
    assert spec["timeout"] >= 600


def test_gpu_spec_records_the_points_a_schedule_does_not_allow_as_invalid(tmp_path, fake_ppbench):
    binary, log = fake_ppbench
    # The spec's transformer group on the corners of its grid (every point would take minutes
    # of fake runs; the full grid's coverage is checked above).
    spec = gpu_spec()
    group = next(g for g in spec["runs"] if g["workload"] == "transformer")
    spec["runs"] = [{**group, "devices": [1, 8], "microbatches": [4, 16]}]
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(spec))
    counts = sweep.run_sweep(path, binary, tmp_path / "gpu")
    assert counts["error"] == 0 and counts["ok"] + counts["invalid"] == 10 * 2 * 2
    rows = read_jsonl(tmp_path / "gpu.jsonl")
    status = {(r["point"]["schedule"], r["point"]["devices"], r["point"]["microbatches"]):
              r["status"] for r in rows}
    # what the schedules' definitions rule out, as in the CPU sweep
    for invalid in [("dualpipe", 1, 4), ("chimera", 1, 16), ("1f1b", 8, 4), ("zb-v", 8, 4),
                    ("dualpipe", 8, 4), ("chimera", 8, 4), ("zb-h2", 8, 4)]:
        assert status[invalid] == "invalid", invalid
    for ok in [("naive", 1, 4), ("gpipe", 8, 16), ("1f1b", 1, 4), ("1f1b", 8, 16),
               ("dualpipe", 8, 16), ("chimera", 8, 16), ("zb-v", 8, 16), ("dualpipev", 1, 4)]:
        assert status[ok] == "ok", ok
    ok_row = next(r for r in rows if r["status"] == "ok" and r["point"]["devices"] == 8)
    assert ok_row["point"]["virtual_devices"] is True and ok_row["point"]["backend"] == "cuda"
    # a second run skips every recorded point, invalid ones included
    before = len(calls(log))
    assert sweep.run_sweep(path, binary, tmp_path / "gpu")["skipped"] == 40
    assert len(calls(log)) == before


def test_gpu_rows_carry_the_gpu_and_its_partitions_into_the_csv(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GPU_GROUP], name="gpu")
    counts = sweep.run_sweep(spec, binary, tmp_path / "gpu")
    assert counts["error"] == 0 and counts["ok"] > 0
    with (tmp_path / "gpu.csv").open() as f:
        table = list(csv.DictReader(f))
    row = next(r for r in table if r["schedule"] == "1f1b" and r["devices"] == "4"
               and r["microbatches"] == "8")
    assert row["backend"] == "cuda" and row["virtual_devices"] == "True"
    assert row["gpu"] == "Fake H100" and row["sms_per_rank"] == "32/32/32/32"
    assert row["placement"].startswith("GPU 0 split into 4 virtual devices")
    assert row["partitions_as_requested"] == "true"
    assert row["transport"] == "device-to-device copies"
    invalid = next(r for r in table if r["status"] == "invalid")
    assert invalid["gpu"] == "" and invalid["backend"] == "cuda"


def test_cpu_rows_have_empty_gpu_columns(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{**RUN_GROUP, "devices": 2, "microbatches": 4}])
    sweep.run_sweep(spec, binary, tmp_path / "cpu")
    with (tmp_path / "cpu.csv").open() as f:
        table = list(csv.DictReader(f))
    assert all(r["gpu"] == "" and r["sms_per_rank"] == "" and r["backend"] == "" for r in table)


def test_gpu_progress_line_names_the_partitions(tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{**GPU_GROUP, "schedule": "1f1b", "devices": 4,
                                             "microbatches": 8}])
    run = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                          binary, "--out", str(tmp_path / "res")], capture_output=True,
                         text=True, check=True)
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("[1/1]"))
    assert line.startswith("[1/1] mlp 1f1b D=4 N=8 b=8 on cuda (4 partitions) ... bubble ")
    assert "4x32 SMs" in line and line.endswith(" s)")


def test_no_gpu_is_an_error_row_that_is_retried_not_an_invalid_point(tmp_path, fake_ppbench,
                                                                     monkeypatch):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{**GPU_GROUP, "schedule": "1f1b", "devices": 2,
                                             "microbatches": [1, 4]}])
    monkeypatch.setenv("FAKE_PPBENCH_NO_GPU", "1")
    counts = sweep.run_sweep(spec, binary, tmp_path / "gpu")
    # N=1 < D=2 is the point's fault; "no CUDA device visible" is the machine's
    assert counts == {"ok": 0, "invalid": 1, "error": 1, "skipped": 0}
    rows = {r["point"]["microbatches"]: r for r in read_jsonl(tmp_path / "gpu.jsonl")}
    assert rows[4]["status"] == "error" and "no CUDA device visible" in rows[4]["error"]
    monkeypatch.delenv("FAKE_PPBENCH_NO_GPU")
    assert sweep.run_sweep(spec, binary, tmp_path / "gpu") == {
        "ok": 1, "invalid": 0, "error": 0, "skipped": 1}


def test_virtual_devices_need_the_cuda_backend():
    with pytest.raises(ValueError, match="virtual_devices"):
        sweep_spec.expand_spec({"runs": [{**RUN_GROUP, "virtual_devices": True}]})
    # CPU points keep their key: rows recorded before the key existed are still found
    old = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp")
    point = old.as_dict()
    del point["virtual_devices"]
    assert sweep_records.row_key({"point": point}) == old.key()
    assert "--virtual-devices" not in old.argv()


# --- runs under mpirun (`mpirun -np P ppbench run --devices D --dp R`) ------------------------

MPI_GROUP = {**RUN_GROUP, "name": "m", "launcher": "mpirun", "schedule": "1f1b", "devices": 2,
             "microbatches": 4}


def test_mpirun_points_build_the_mpirun_command_line():
    points = sweep_spec.expand_spec({"runs": [{**MPI_GROUP, "replicas": [1, 2]}, RUN_GROUP]})
    one, two = [p for p in points if p.launcher == "mpirun"]
    assert one.command_line("bin/ppbench") == [
        "mpirun", "-np", "2", "bin/ppbench", *one.argv()]
    assert "--dp" not in one.argv()
    line = two.command_line("bin/ppbench")
    assert line[:4] == ["mpirun", "-np", "4", "bin/ppbench"]
    assert line[line.index("--dp") + 1] == "2" and line[line.index("--devices") + 1] == "2"
    threaded = next(p for p in points if p.launcher is None)
    assert threaded.command_line("bin/ppbench")[0] == "bin/ppbench"
    assert "--dp" not in threaded.argv() and threaded.environment(2) is None
    # mpirun may run as root; oversubscription only where the processes exceed the cores
    assert one.environment(2)["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert "OMPI_MCA_rmaps_base_oversubscribe" not in one.environment(2)
    assert two.environment(2)["OMPI_MCA_rmaps_base_oversubscribe"] == "1"
    assert one.label() == "mlp 1f1b D=2 N=4 b=8 in 2 processes (mpirun)"
    assert two.label() == "mlp 1f1b D=2 N=4 b=8 R=2 in 4 processes (mpirun)"


def test_launcher_threads_is_the_default_and_keeps_old_keys():
    old = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp")
    assert sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp", launcher="threads",
                                  replicas=1).key() == old.key()
    point = old.as_dict()
    del point["launcher"], point["replicas"]  # a row recorded before the keys existed
    assert sweep_records.row_key({"point": point}) == old.key()
    mpi = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp", launcher="mpirun")
    assert mpi.key() != old.key() and mpi.replicas == 1
    with pytest.raises(ValueError, match="needs one process per rank"):
        sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp", replicas=2)
    # the GPU under mpirun: each process takes the GPU of its local rank, so no placement flags
    gpu = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp", launcher="mpirun",
                                 backend="cuda")
    assert gpu.command_line("p")[:4] == ["mpirun", "-np", "2", "p"]
    assert "--gpus" not in gpu.argv() and "--virtual-devices" not in gpu.argv()
    for placement in ({"gpus": True}, {"virtual_devices": True}):
        with pytest.raises(ValueError, match="GPU of its local rank"):
            sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp", launcher="mpirun",
                                   backend="cuda", **placement)


def test_mpirun_sweep_records_multi_process_rows(tmp_path, fake_ppbench, fake_mpirun,
                                                 monkeypatch):
    binary, log = fake_ppbench
    monkeypatch.setattr(sweep_process.os, "cpu_count", lambda: 2)
    spec = write_spec(tmp_path / "s.json", [{**MPI_GROUP, "replicas": [1, 2]}])
    counts = sweep.run_sweep(spec, binary, tmp_path / "mpi")
    assert counts == {"ok": 2, "invalid": 0, "error": 0, "skipped": 0}
    launched = [json.loads(ln) for ln in fake_mpirun.read_text().splitlines()]
    assert [c["argv"][:4] for c in launched] == [["-np", "2", binary, "run"],
                                                 ["-np", "4", binary, "run"]]
    assert all(c["env"]["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1" for c in launched)
    assert [c["env"].get("OMPI_MCA_rmaps_base_oversubscribe") for c in launched] == [None, "1"]
    # ppbench itself saw --devices 2 and, for two replicas, --dp 2
    ran = [c for c in calls(log) if c[0] == "run"]
    assert [c[c.index("--dp") + 1] if "--dp" in c else None for c in ran] == [None, "2"]
    rows = read_jsonl(tmp_path / "mpi.jsonl")
    assert [r["launch"]["processes"] for r in rows] == [2, 4]
    assert [(r["point"]["launcher"], r["point"]["replicas"]) for r in rows] == [
        ("mpirun", 1), ("mpirun", 2)]
    with (tmp_path / "mpi.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [(r["launcher"], r["replicas"]) for r in table] == [("mpirun", "1"), ("mpirun", "2")]
    # resumed like any other point
    assert sweep.run_sweep(spec, binary, tmp_path / "mpi")["skipped"] == 2


def test_mpirun_progress_line(tmp_path, fake_ppbench, fake_mpirun):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [MPI_GROUP])
    run = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                          binary, "--out", str(tmp_path / "res")], capture_output=True,
                         text=True, check=True)
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("[1/1]"))
    assert line.startswith("[1/1] mlp 1f1b D=2 N=4 b=8 in 2 processes (mpirun) ... bubble ")


def test_without_mpirun_the_mpirun_groups_are_skipped_with_one_note(tmp_path, fake_ppbench):
    binary, log = fake_ppbench
    empty = tmp_path / "nothing-on-path"
    empty.mkdir()
    spec = write_spec(tmp_path / "s.json", [RUN_GROUP, MPI_GROUP])
    run = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                          binary, "--out", str(tmp_path / "res")], capture_output=True,
                         text=True, env=dict(os.environ, PATH=str(empty)))
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    notes = [ln for ln in run.stdout.splitlines() if "note:" in ln]
    assert notes == ["sweep 't': note: no mpirun on PATH (Debian: openmpi-bin; make deps installs "
                     "it): skipping runs[1] (\"m\") (\"launcher\": \"mpirun\")"]
    # the threads group ran, the mpirun group did not
    rows = read_jsonl(tmp_path / "res.jsonl")
    assert rows and all(r["point"]["launcher"] is None for r in rows)
    assert len(rows) == len(sweep_spec.expand_spec({"runs": [RUN_GROUP]}))
    assert len([c for c in calls(log) if c[0] == "run"]) == len(rows)


def test_a_spec_of_mpirun_groups_only_runs_nothing_without_mpirun(tmp_path, fake_ppbench,
                                                                  monkeypatch):
    binary, _ = fake_ppbench
    monkeypatch.setattr(sweep.shutil, "which", lambda name: None)
    spec = write_spec(tmp_path / "s.json", [MPI_GROUP])
    counts = sweep.run_sweep(spec, binary, tmp_path / "res")
    assert counts == {"ok": 0, "invalid": 0, "error": 0, "skipped": 0}


def test_a_ppbench_without_mpi_is_refused_for_an_mpirun_spec(tmp_path, fake_ppbench, fake_mpirun,
                                                             monkeypatch):
    binary, log = fake_ppbench
    monkeypatch.setenv("FAKE_PPBENCH_NO_MPI", "1")
    spec = write_spec(tmp_path / "s.json", [MPI_GROUP])
    with pytest.raises(sweep_spec.MachineError, match="needs a ppbench built with MPI"):
        sweep.run_sweep(spec, binary, tmp_path / "res")
    assert not fake_mpirun.exists()
    # a spec without mpirun groups does not care
    threads = write_spec(tmp_path / "t.json", [{**RUN_GROUP, "devices": 2, "microbatches": 4}])
    assert sweep.run_sweep(threads, binary, tmp_path / "t")["error"] == 0


# --- GPU groups: "gpus" (--gpus 0,...,D-1) and "min_gpus" ----------------------------------

GPUS_GROUP = {**RUN_GROUP, "name": "g", "backend": "cuda", "gpus": True, "min_gpus": 2,
              "schedule": "1f1b", "devices": [2, 4], "microbatches": 4}


def test_gpus_points_list_one_gpu_per_rank():
    two, four = sweep_spec.expand_spec({"runs": [GPUS_GROUP]})
    assert two.argv()[two.argv().index("--gpus") + 1] == "0,1"
    assert four.argv()[four.argv().index("--gpus") + 1] == "0,1,2,3"
    assert two.label() == "mlp 1f1b D=2 N=4 b=8 on cuda (2 GPUs)"
    # a CPU point's key is unchanged by the new key (rows recorded before it are still found)
    old = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp")
    point = old.as_dict()
    del point["gpus"]
    assert sweep_records.row_key({"point": point}) == old.key()
    with pytest.raises(ValueError, match="two placements"):
        sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp", backend="cuda",
                               gpus=True, virtual_devices=True)


def fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
    bin_dir = tmp_path / "smibin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    lines = "".join(f"GPU {k}: NVIDIA H100 80GB HBM3 (UUID: GPU-{k})\\n" for k in range(gpus))
    script.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.parametrize("gpus", [0, 1])
def test_a_group_needing_more_gpus_than_listed_is_skipped_with_a_note(tmp_path, fake_ppbench,
                                                                      monkeypatch, capsys, gpus):
    binary, log = fake_ppbench
    if gpus:
        fake_nvidia_smi(tmp_path, monkeypatch, gpus)
    else:
        monkeypatch.setattr(sweep_process, "NVIDIA_SMI", "no-such-nvidia-smi")
    spec = write_spec(tmp_path / "s.json", [RUN_GROUP, GPUS_GROUP])
    counts = sweep.run_sweep(spec, binary, tmp_path / "res")
    ran = counts["ok"] + counts["invalid"] + counts["error"]
    assert ran == len(sweep_spec.expand_spec({"runs": [RUN_GROUP]}))
    notes = [ln for ln in capsys.readouterr().out.splitlines() if "note:" in ln]
    listed = "1 GPU" if gpus == 1 else "0 GPUs"
    assert notes == [f"sweep 't': note: nvidia-smi lists {listed}: skipping runs[1] (\"g\") "
                     "(needs 2) (\"min_gpus\")"]
    assert not any("--gpus" in c for c in calls(log))


def test_a_group_runs_where_enough_gpus_are_listed(tmp_path, fake_ppbench, monkeypatch, capsys):
    binary, log = fake_ppbench
    fake_nvidia_smi(tmp_path, monkeypatch, 2)
    assert sweep_process.visible_gpu_count() == 2
    spec = write_spec(tmp_path / "s.json", [GPUS_GROUP])
    sweep.run_sweep(spec, binary, tmp_path / "res")
    assert "note:" not in capsys.readouterr().out
    ran = [c for c in calls(log) if c[0] == "run"]
    assert [c[c.index("--gpus") + 1] for c in ran] == ["0,1", "0,1,2,3"]


def test_the_gpus_of_separate_programs_are_asked_of_ppbench_cuda(tmp_path):
    """ppbench hands CUDA runs to ppbench-cuda beside it: a sweep's recorded_by names the GPU
    that program sees (it named none, as ppbench's own --version lists no GPU)."""
    def program(name: str, version: str) -> str:
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{version}\nEOF\n")
        path.chmod(0o755)
        return str(path)

    ppbench = program("ppbench", "ppbench 0.1.0 (CUDA runs by ppbench-cuda beside it; "
                                 "`ppbench-cuda --version` lists the GPUs)\nMPI: compiled in "
                                 "(mpirun -np P ppbench run ... runs one pipeline rank per "
                                 "process, by ppbench-mpi beside it)")
    assert sweep_process.version_facts(ppbench) == ([], True, None)  # no ppbench-cuda there
    program("ppbench-cuda", "ppbench 0.1.0 (CUDA support compiled in)\nGPU 0: NVIDIA H100 80GB "
                            "HBM3, 132 SMs, 79.1 GiB\nGPU 1: NVIDIA H100 80GB HBM3, 132 SMs\n"
                            "CUDA runtime 13.0, driver 13.0, cuBLASLt 13.1.0\n"
                            "MPI: not compiled in (runs stay in one process)")
    assert sweep_process.version_facts(ppbench) == (
        ["NVIDIA H100 80GB HBM3"] * 2, True, "CUDA runtime 13.0, driver 13.0, cuBLASLt 13.1.0")


ONLY_SPEC = [{"schedule": ["gpipe", "1f1b"], "devices": [2, 4], "microbatches": [4, 8]}]


def test_only_runs_the_selected_points_which_a_whole_sweep_then_skips(tmp_path, fake_ppbench,
                                                                      capsys):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", ONLY_SPEC)
    only = sweep_spec.parse_only(["schedule=1f1b", "microbatches=8"])
    counts = sweep.run_sweep(spec, binary, tmp_path / "res", only=only)
    assert counts == {"ok": 2, "invalid": 0, "error": 0, "skipped": 0}
    simulated = [c for c in calls(log) if c[0] == "simulate"]
    assert [(c[c.index("--schedule") + 1], c[c.index("--devices") + 1],
             c[c.index("--microbatches") + 1]) for c in simulated] == [("1f1b", "2", "8"),
                                                                       ("1f1b", "4", "8")]
    assert "note: --only schedule=1f1b microbatches=8: 2 of the spec's 8 points" in \
        capsys.readouterr().out
    # The subset's records are the whole sweep's: it runs only the other six.
    counts = sweep.run_sweep(spec, binary, tmp_path / "res")
    assert counts["skipped"] == 2 and counts["ok"] + counts["invalid"] == 6
    assert len(read_jsonl(tmp_path / "res.jsonl")) == 8


def test_only_backend_cpu_selects_run_points_that_name_no_backend():
    runs = [{"command": "run", "workload": "mlp", "schedule": "1f1b", "devices": [2, 4],
             "microbatches": 8},
            {"command": "run", "workload": "mlp", "schedule": "1f1b", "devices": 2,
             "microbatches": 8, "backend": "cuda", "virtual_devices": True}]
    points = sweep_spec.expand_spec({"runs": runs})
    cpu = sweep_spec.select_points(points, sweep_spec.parse_only(["backend=cpu"]), "s.json")
    assert [(p.devices, p.backend) for p in cpu] == [(2, None), (4, None)]
    cuda = sweep_spec.select_points(points, sweep_spec.parse_only(["backend=cuda"]), "s.json")
    assert [(p.devices, p.backend) for p in cuda] == [(2, "cuda")]


@pytest.mark.parametrize("args, words", [
    (["--only", "devices=x"], ["'x'", "whole number"]),
    (["--only", "stage=1"], ["'stage'", "microbatches"]),
    (["--only", "devices"], ["KEY=V1,V2"]),
    (["--only", "schedule=1f1b,"], ["empty value"]),
    (["--only", "microbatches=3,4"], ["microbatches=3", "4, 8"]),
    (["--only", "schedule=zb-h1"], ["schedule=zb-h1", "1f1b, gpipe"]),
    (["--only", "devices=2", "--only", "devices=4"],
     ["--only 'devices=2' and --only 'devices=4'", "share no value"]),
])
def test_only_bad_values_exit_2_with_one_line_naming_them(tmp_path, fake_ppbench, args, words):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", ONLY_SPEC)
    r = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                        binary, "--out", str(tmp_path / "res"), *args], capture_output=True,
                       text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert not calls(log) and not (tmp_path / "res.jsonl").exists()
