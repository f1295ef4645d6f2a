"""benchmarks/mpi_transport.py against the fake ppbench and the fake mpirun (conftest.py): the
commands it runs, the figures it derives from the records and traces, and its refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, calls

sys.path.insert(0, str(ROOT / "benchmarks"))
import mpi_transport  # noqa: E402

SCRIPT = ROOT / "benchmarks" / "mpi_transport.py"


def run_script(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, check=False)


def test_it_times_threads_against_processes_and_records_the_machine(tmp_path, fake_ppbench,
                                                                    fake_mpirun):
    binary, log = fake_ppbench
    out = tmp_path / "mpi.json"
    run = run_script("--ppbench", binary, "--steps", "2", "--warmup", "0", "--repeats", "2",
                     "--out", str(out))
    assert run.returncode == 0, run.stderr
    record = json.loads(out.read_text())
    prov = record["provenance"]
    for key in ("commit", "host", "cpu", "cpu_cores", "load_average_before",
                "load_average_after", "openmpi", "date"):
        assert prov[key] not in (None, ""), key
    assert prov["openmpi"].startswith("mpirun ")  # the first line of `mpirun --version`

    # every point twice per repeat, threads first, then the same argv under mpirun -np 2
    runs = [c for c in calls(log) if c[0] == "run"]
    assert len(runs) == 2 * 2 * (3 + 3 + 5)
    launched = [json.loads(line)["argv"] for line in fake_mpirun.read_text().splitlines()
                if json.loads(line)["argv"][0] == "-np"]
    assert len(launched) == 2 * (3 + 3 + 5)
    assert all(a[:3] == ["-np", "2", binary] for a in launched)
    assert [a[3:] for a in launched] == runs[1::2]
    assert all(c[c.index("--pp") + 1] == "2" and "--dp" not in c for c in runs)

    sizes = [(r["width"], r["microbatch_size"], r["message_bytes"]) for r in record["latency"]]
    assert sizes == [(8, 2, 64), (8, 2048, 65536), (8, 131072, 4194304)]
    for row in record["latency"]:
        # the fake's trace: a 1 us hand-over in threads, 5 us between processes
        assert row["threads"]["handover_s"]["median"] == pytest.approx(1e-6)
        assert row["mpirun"]["handover_s"]["median"] == pytest.approx(5e-6)
        assert row["mpi_minus_threads_handover_s"] == pytest.approx(4e-6)
        assert row["threads"]["handover_s"]["count"] == 2 * row["threads"]["messages_per_step"]
        steps = row["mpirun"]["makespan_s"]["steps"]
        assert steps == 2 * 2
        assert row["mpirun"]["makespan_per_message_s"] == pytest.approx(
            row["mpirun"]["makespan_s"]["median"] / row["mpirun"]["messages_per_step"])

    assert [(r["case"], r["schedule"]) for r in record["fidelity"]] == [
        ("compute-bound", "1f1b"), ("compute-bound", "zb-h1"), ("compute-bound", "gpipe"),
        ("hand-over-bound", "1f1b"), ("hand-over-bound", "interleaved-1f1b"),
        ("hand-over-bound", "zb-h1"), ("hand-over-bound", "zb-v"),
        ("hand-over-bound", "dualpipev")]
    fidelity_runs = [c for c in runs[::2] if "--trace-out" not in c]
    assert [(c[c.index("-b") + 1], c[c.index("-n") + 1]) for c in fidelity_runs] == (
        [("64", "8")] * 3 * 2 + [("8", "32")] * 5 * 2)
    for row in record["fidelity"]:
        for launcher in ("threads", "mpirun"):
            gaps = [r["gap"] for r in row[launcher]["runs"]]
            assert len(gaps) == 2
            assert all(r["gap"] == pytest.approx(r["measured_bubble_fraction"]
                                                 - r["predicted_bubble_fraction"])
                       for r in row[launcher]["runs"])
            assert row[launcher]["max_abs_gap"] == pytest.approx(max(abs(g) for g in gaps))
    assert "bubble gap, measured - predicted" in run.stdout and str(out) in run.stdout


def test_only_one_part(tmp_path, fake_ppbench, fake_mpirun):
    binary, log = fake_ppbench
    out = tmp_path / "f.json"
    run = run_script("--ppbench", binary, "--steps", "1", "--repeats", "1", "--only",
                     "fidelity", "--out", str(out))
    assert run.returncode == 0, run.stderr
    record = json.loads(out.read_text())
    assert "latency" not in record and len(record["fidelity"]) == 3 + 5
    assert all("--trace-out" not in c for c in calls(log) if c[0] == "run")


def test_without_mpirun_it_refuses_with_one_line_and_exit_3(tmp_path, fake_ppbench):
    binary, log = fake_ppbench
    empty = tmp_path / "nothing-on-path"
    empty.mkdir()
    run = run_script("--ppbench", binary, "--out", str(tmp_path / "x.json"),
                     env=dict(os.environ, PATH=str(empty)))
    assert run.returncode == 3
    assert run.stderr.splitlines() == [
        "mpi_transport: mpirun not found on PATH: the multi-process runs need OpenMPI "
        "(Debian: openmpi-bin, installed by make deps)"]
    assert calls(log, probes=True) == [] and not (tmp_path / "x.json").exists()


def test_a_ppbench_without_mpi_is_exit_3(tmp_path, fake_ppbench, fake_mpirun, monkeypatch):
    binary, _ = fake_ppbench
    monkeypatch.setenv("FAKE_PPBENCH_NO_MPI", "1")
    run = run_script("--ppbench", binary, "--out", str(tmp_path / "x.json"))
    assert run.returncode == 3 and "was built without MPI" in run.stderr
    assert len(run.stderr.splitlines()) == 1


def test_no_ppbench_is_exit_2(tmp_path):
    run = run_script("--ppbench", str(tmp_path / "nope"))
    assert run.returncode == 2 and "no executable ppbench there" in run.stderr


def test_a_failed_run_names_its_command_and_exits_1(tmp_path, fake_ppbench, fake_mpirun,
                                                    monkeypatch):
    binary, _ = fake_ppbench
    monkeypatch.setattr(mpi_transport, "FIDELITY_CASES", (("crashing", 8, 2, ("crash",)),))
    with pytest.raises(mpi_transport.Failure, match="crash.*exited 1"):
        mpi_transport.measure_fidelity(binary, "mpirun", 1, 0, 1)


def test_quantiles():
    q = mpi_transport.quantiles([5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert q["median"] == 5.5 and q["p10"] == 2.0 and q["p90"] == 10.0 and q["count"] == 10
    assert mpi_transport.quantiles([])["median"] is None
