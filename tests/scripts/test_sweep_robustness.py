"""The sweep where things go wrong around it: a point's processes that leave its process group
(mpirun's ranks), stop signals at awkward moments, output that is not UTF-8 or not finite, a
full disk, records of several builds in turn, CSVs of an earlier layout, mixed launchers."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import results_io
import sweep
import sweep_point
import sweep_process
import sweep_records
import sweep_spec
from conftest import FAKE_PPBENCH, SCRIPTS

GOOD = {"schedule": ["gpipe", "1f1b"], "devices": 2, "microbatches": [2, 4]}
RUN = {"command": "run", "workload": "mlp", "workload_flags": "--layers 4 --width 64",
       "schedule": "1f1b", "devices": 2, "microbatches": 4, "microbatch_size": 8, "steps": 1}
UTC_DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def write_spec(path: Path, runs: list, **top) -> Path:
    path.write_text(json.dumps({"name": "t", "runs": runs, **top}))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def strict(line: str):
    return json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in {line}"))


# --- 1, 8: every process of a point ends with it -------------------------------------------

# A launcher like mpirun: it starts a "rank" in a process group of its own (in its session),
# waits until the rank has written its pid, then (with "stop") sends SIGTERM to the sweep, and
# sleeps. With "pipes" the rank keeps the launcher's stdout and stderr open.
LAUNCHER = """
import os, signal, subprocess, sys, time
pidfile, pipes, stop = sys.argv[1], sys.argv[2] == "pipes", sys.argv[3] == "stop"
rank = ("import os, sys, time; os.setpgid(0, 0); "
        "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); "
        "os.rename(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(60)")
out = None if pipes else subprocess.DEVNULL
subprocess.Popen([sys.executable, "-c", rank, pidfile], stdout=out, stderr=out)
while not os.path.exists(pidfile):
    time.sleep(0.01)
if stop:
    os.kill(os.getppid(), signal.SIGTERM)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    """Whether pid runs (a zombie nobody reaped yet has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 1:].split()[0] not in (b"Z", b"X")


def ended_soon(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def launcher(tmp_path, monkeypatch):
    """(argv of the launcher but its two words, pidfile); the rank is killed afterwards in any
    case, and STOP is as it was."""
    monkeypatch.setattr(sweep_process.STOP, "signum", None)
    monkeypatch.setattr(sweep_process, "TERM_GRACE_S", 1.0, raising=False)
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    pidfile = tmp_path / "rank.pid"
    yield [sys.executable, str(script), str(pidfile)], pidfile
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("pipes", ["pipes", "no-pipes"])
def test_a_timeout_ends_the_processes_in_process_groups_of_their_own(launcher, pipes):
    argv, pidfile = launcher
    start = time.monotonic()
    assert sweep_process.run_child([*argv, pipes, "run"], timeout=5) is None
    # generous: the timeout, the grace period and the kill, far below the rank's 60 s
    assert time.monotonic() - start < 40
    assert pidfile.exists(), "the rank did not start within the timeout"
    assert ended_soon(int(pidfile.read_text()))


def test_a_stop_signal_ends_the_processes_in_process_groups_of_their_own(launcher):
    argv, pidfile = launcher
    with sweep_process.stop_signals():
        with pytest.raises(sweep_process.Stopped):
            sweep_process.run_child([*argv, "no-pipes", "stop"], timeout=120)
    assert sweep_process.STOP.signum == signal.SIGTERM
    assert ended_soon(int(pidfile.read_text()))


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period(launcher):
    ignoring = [sys.executable, "-c", "import signal, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
                "time.sleep(60)"]
    start = time.monotonic()
    assert sweep_process.run_child(ignoring, timeout=1) is None
    assert time.monotonic() - start < 40


def test_a_stop_signal_before_the_child_is_known_still_stops_it(monkeypatch):
    """The signal came after run_child looked at STOP.signum, before STOP.child was set: the
    handler found no child to stop; run_child must, rather than let it run to its end."""
    monkeypatch.setattr(sweep_process.STOP, "signum", None)
    started = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        proc = real(*args, **kwargs)
        started.append(proc)
        sweep_process.STOP.signum = signal.SIGTERM  # right here
        return proc

    monkeypatch.setattr(sweep_process.subprocess, "Popen", popen)
    with pytest.raises(sweep_process.Stopped):
        sweep_process.run_child([sys.executable, "-c", "import time; time.sleep(3)"], 60)
    assert started[0].returncode is not None and started[0].returncode < 0  # killed, not done


# --- 2, 7: output that is not UTF-8, numbers that are not finite ---------------------------

@pytest.fixture
def odd_ppbench(tmp_path, fake_ppbench):
    """The fake ppbench, but schedule "bytes" fails with bytes that are not UTF-8 on stderr,
    "bytes-out" prints such bytes in place of its record, "nan" prints a record holding NaN."""
    script = tmp_path / "odd-ppbench"
    script.write_text(f"""#!/bin/sh
case " $* " in
  *" bytes "*) printf 'crashed \\377\\376 here\\n' >&2; exit 1;;
  *" bytes-out "*) printf 'a record \\377\\376\\n'; exit 0;;
  *" nan "*) printf '{{"bubble_fraction": NaN}}\\n'; exit 0;;
esac
exec '{sys.executable}' '{FAKE_PPBENCH}' "$@"
""")
    script.chmod(0o755)
    return str(script)


def test_output_that_is_not_utf8_is_an_error_row_not_the_end_of_the_sweep(tmp_path, odd_ppbench):
    spec = write_spec(tmp_path / "s.json", [{**GOOD, "schedule": ["gpipe", "bytes", "bytes-out"],
                                             "microbatches": 2}])
    counts = sweep.run_sweep(spec, odd_ppbench, tmp_path / "out")
    assert counts == {"ok": 1, "invalid": 0, "error": 2, "skipped": 0}
    rows = {r["point"]["schedule"]: r for r in read_jsonl(tmp_path / "out.jsonl")}
    assert rows["bytes"]["error"] == "exit 1: crashed \ufffd\ufffd here"
    assert rows["bytes-out"]["status"] == "error"


def test_a_record_that_is_not_finite_is_an_error_row_and_never_written(tmp_path, odd_ppbench):
    spec = write_spec(tmp_path / "s.json", [{**GOOD, "schedule": ["gpipe", "nan"],
                                             "microbatches": 2}])
    counts = sweep.run_sweep(spec, odd_ppbench, tmp_path / "out")
    assert counts["ok"] == 1 and counts["error"] == 1
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    rows = {r["point"]["schedule"]: r for r in map(strict, lines)}
    assert "unparseable output" in rows["nan"]["error"] and "NaN" in rows["nan"]["error"]


def test_append_jsonl_refuses_nan_and_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "r.jsonl"
    results_io.append_jsonl(path, {"a": 1})
    with pytest.raises(ValueError):
        results_io.append_jsonl(path, {"a": float("nan")})
    assert path.read_text() == '{"a":1}\n'


@pytest.mark.parametrize("comm, words", [
    ("1e999", ["1e999", "finite"]),
    ("-1e999", ["-1e999", "finite"]),
    ("1e13", ['runs[0]', 'key "comm"', "1e12"]),
])
def test_a_comm_beyond_ppbench_bound_is_refused(tmp_path, comm, words):
    spec = tmp_path / "s.json"
    spec.write_text('{"runs": [{"schedule": "gpipe", "devices": 2, "microbatches": 2, '
                    f'"comm": [0, {comm}]}}]}}')
    with pytest.raises(sweep_spec.SpecError) as e:
        sweep_spec.load_spec(spec)
    assert len(str(e.value).splitlines()) == 1
    for word in words:
        assert word in str(e.value), (word, str(e.value))


def test_a_non_finite_spec_number_is_one_line_and_exit_2(tmp_path, fake_ppbench):
    spec = tmp_path / "s.json"
    spec.write_text('{"runs": [{"schedule": "gpipe", "devices": 2, "microbatches": 2, '
                    '"comm": 1e999}]}')
    run = subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                          fake_ppbench[0], "--out", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [
        f"sweep: {spec}: not JSON this program can read (1e999 is too large for a double (a "
        "finite number is needed))"]


def test_the_largest_comm_ppbench_takes_is_allowed(tmp_path):
    spec = write_spec(tmp_path / "s.json", [{**GOOD, "comm": 1e12}])
    assert {p.comm for p in sweep_spec.load_spec(spec)[1]} == {1e12}


def test_the_schema_bound_on_comm_is_ppbench_own():
    cost_model = Path(__file__).resolve().parents[2] / "harness" / "cost_model.h"
    bound = re.search(r"kMaxCost = ([0-9e.]+);", cost_model.read_text()).group(1)
    comm = sweep_spec.load_schema()["$defs"]["simulateGroup"]["properties"]["comm"]["anyOf"]
    assert comm[0]["maximum"] == comm[1]["items"]["maximum"] == float(bound)


# --- 3: PREFIX.previous.jsonl keeps every generation ---------------------------------------

def test_records_set_aside_again_keep_what_an_earlier_sweep_set_aside(tmp_path, fake_ppbench,
                                                                      monkeypatch):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    for commit in ("aaaa111", "bbbb222", "aaaa111"):
        monkeypatch.setenv("FAKE_PPBENCH_COMMIT", commit)
        sweep.run_sweep(spec, binary, tmp_path / "out")
    previous = read_jsonl(tmp_path / "out.previous.jsonl")
    assert sorted(r["recorded_by"]["git_commit"] for r in previous) == \
        ["aaaa111"] * 4 + ["bbbb222"] * 4


def test_a_torn_line_set_aside_never_replaces_records_set_aside(tmp_path, fake_ppbench,
                                                                monkeypatch):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    monkeypatch.setenv("FAKE_PPBENCH_COMMIT", "aaaa111")
    sweep.run_sweep(spec, binary, tmp_path / "out")
    monkeypatch.setenv("FAKE_PPBENCH_COMMIT", "bbbb222")
    sweep.run_sweep(spec, binary, tmp_path / "out")
    with (tmp_path / "out.jsonl").open("a") as f:
        f.write('{"point": {"sched')  # a writer killed mid-line
    sweep.run_sweep(spec, binary, tmp_path / "out")
    lines = (tmp_path / "out.previous.jsonl").read_text().splitlines()
    assert lines[-1] == '{"point": {"sched'
    assert [json.loads(ln)["recorded_by"]["git_commit"] for ln in lines[:-1]] == ["aaaa111"] * 4


def test_records_set_aside_twice_are_not_doubled(tmp_path, fake_ppbench, monkeypatch):
    """A sweep stopped after setting records aside but before compacting PREFIX.jsonl: the next
    one sets the same lines aside again."""
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    sweep.run_sweep(spec, binary, tmp_path / "out")
    text = (tmp_path / "out.jsonl").read_text()
    other = {**json.loads(text.splitlines()[0])["recorded_by"], "git_commit": "cccc333"}
    for _ in range(2):
        (tmp_path / "out.jsonl").write_text(text)
        sweep_records.Records(tmp_path / "out", other).settle()
    assert (tmp_path / "out.previous.jsonl").read_text() == text


# --- 4, 12: a write cut short leaves no torn line ---------------------------------------------

def test_a_short_append_is_undone_and_raised(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    results_io.append_jsonl(path, {"a": 1})
    real = os.write

    def short(fd, data):
        return real(fd, data[:len(data) // 2] if b'"pad"' in data else data)

    monkeypatch.setattr(results_io.os, "write", short)
    with pytest.raises(OSError, match="short write"):
        results_io.append_jsonl(path, {"a": 2, "pad": "x" * 100})
    monkeypatch.undo()
    assert path.read_text() == '{"a":1}\n'


def test_an_append_whose_sync_fails_is_undone(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    results_io.append_jsonl(path, {"a": 1})

    def fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(results_io.os, "fsync", fsync)
    with pytest.raises(OSError):
        results_io.append_jsonl(path, {"a": 2})
    monkeypatch.undo()
    assert path.read_text() == '{"a":1}\n'


def test_an_append_beyond_the_file_size_limit_leaves_the_file_whole(tmp_path):
    path = tmp_path / "r.jsonl"
    results_io.append_jsonl(path, {"a": 1})
    code = f"""
import resource, signal, sys
sys.path.insert(0, {str(SCRIPTS)!r})
from pathlib import Path
import results_io
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is then cut short
path = Path(sys.argv[1])
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 10, hard))
try:
    results_io.append_jsonl(path, {{"pad": "x" * 1000}})
except OSError as e:
    print("refused")
"""
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "refused\n", run.stderr
    assert path.read_text() == '{"a":1}\n'


def test_a_csv_row_whose_append_fails_leaves_the_csv_whole(tmp_path, fake_ppbench, monkeypatch):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    sweep.run_sweep(spec, binary, tmp_path / "out")
    by = read_jsonl(tmp_path / "out.jsonl")[0]["recorded_by"]
    records = sweep_records.Records(tmp_path / "out", by)
    records.settle()
    table = (tmp_path / "out.csv").read_text()
    point = sweep_point.make_point("gpipe", 2, 8)
    row = sweep_process.failed_row(point, {"sweep": "t", "point": point.as_dict(),
                                           "recorded_by": by}, "error", "disk full")
    real = os.write

    def short(fd, data):  # only the CSV row is cut short; the JSONL line goes whole
        return real(fd, data[:5] if data.startswith(b"gpipe,2,8,") else data)

    monkeypatch.setattr(results_io.os, "write", short)
    with pytest.raises(OSError, match="short write"):
        records.put(point, row)
    monkeypatch.undo()
    assert (tmp_path / "out.csv").read_text() == table
    assert len(read_jsonl(tmp_path / "out.jsonl")) == 5  # the record is kept


# --- 5: rows without ppbench's record say when and by whom ---------------------------------

def test_error_and_invalid_rows_have_a_date_and_their_csv_rows_the_provenance(
        tmp_path, fake_ppbench):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [
        {"schedule": ["1f1b", "crash"], "devices": 4, "microbatches": [2, 8]},
        {**RUN, "workload": "broken"}])
    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts["ok"] == 1 and counts["invalid"] == 2 and counts["error"] == 2
    failed = [r for r in read_jsonl(tmp_path / "out.jsonl") if r["status"] != "ok"]
    assert len(failed) == 4 and all(UTC_DATE.match(r["date"]) for r in failed)
    sims = read_csv(tmp_path / "out.csv")
    assert len(sims) == 4
    for row in sims:
        assert row["git_commit"] == "fake123" and UTC_DATE.match(row["date"]), row
    (run,) = read_csv(tmp_path / "out-run.csv")
    assert run["status"] == "invalid"
    assert (run["git_commit"], run["host"], run["cpu"], run["cpu_cores"]) == (
        "fake123", "testhost", "Test CPU", "2")
    assert UTC_DATE.match(run["date"])


# --- 6: PREFIX-run.csv follows the layout ----------------------------------------------------

def test_a_run_csv_of_an_earlier_layout_does_not_outlive_it(tmp_path, fake_ppbench, monkeypatch):
    binary, _ = fake_ppbench
    mixed = write_spec(tmp_path / "mixed.json", [GOOD, RUN])
    monkeypatch.setenv("FAKE_PPBENCH_COMMIT", "aaaa111")
    sweep.run_sweep(mixed, binary, tmp_path / "out")
    assert len(read_csv(tmp_path / "out-run.csv")) == 1
    # another build: the run row is set aside, only simulate rows stand
    monkeypatch.setenv("FAKE_PPBENCH_COMMIT", "bbbb222")
    sweep.run_sweep(write_spec(tmp_path / "sim.json", [GOOD]), binary, tmp_path / "out")
    assert not (tmp_path / "out-run.csv").exists()
    assert len(read_csv(tmp_path / "out.csv")) == 4


def test_the_csv_of_a_prefix_named_run_is_not_taken_for_a_stale_run_csv(tmp_path):
    (tmp_path / "out-run.jsonl").write_text("")
    (tmp_path / "out-run.csv").write_text("its own\n")
    sweep_records.write_csv(tmp_path / "out.csv", [])
    assert (tmp_path / "out-run.csv").read_text() == "its own\n"


# --- 9: a records file with numbers beyond a double -------------------------------------------

def test_a_record_with_an_infinite_point_is_set_aside_not_a_crash(tmp_path):
    good = {"sweep": "t", "status": "ok", "recorded_by": {"host": "h"},
            "point": {"schedule": "gpipe", "devices": 2, "microbatches": 2}}
    (tmp_path / "out.jsonl").write_text(
        json.dumps(good) + "\n"
        + '{"point": {"schedule": "gpipe", "devices": 1e999, "microbatches": 2}, '
          '"recorded_by": {"host": "h"}}\n')
    records = sweep_records.Records(tmp_path / "out", {"host": "h"})
    assert len(records.rows) == 1 and len(records.others) == 1
    records.settle()
    assert "1e999" in (tmp_path / "out.previous.jsonl").read_text()


# --- 10: points under mpirun, one by one ------------------------------------------------------

BOTH = {**RUN, "name": "both", "launcher": ["threads", "mpirun"]}


def test_without_mpirun_only_the_mpirun_points_of_a_group_are_skipped(tmp_path, fake_ppbench,
                                                                      monkeypatch, capsys):
    binary, _ = fake_ppbench
    monkeypatch.setattr(sweep.shutil, "which", lambda name: None)
    spec = write_spec(tmp_path / "s.json", [BOTH])
    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts == {"ok": 1, "invalid": 0, "error": 0, "skipped": 0}
    assert [r["point"]["launcher"] for r in read_jsonl(tmp_path / "out.jsonl")] == [None]
    notes = [ln for ln in capsys.readouterr().out.splitlines() if "note:" in ln]
    assert notes == ["sweep 't': note: no mpirun on PATH (Debian: openmpi-bin; make deps installs "
                     "it): skipping the mpirun points of runs[0] (\"both\") (\"launcher\": "
                     "\"mpirun\")"]


def test_a_ppbench_without_mpi_is_refused_only_for_points_under_mpirun(tmp_path, fake_ppbench,
                                                                       fake_mpirun, monkeypatch):
    binary, _ = fake_ppbench
    monkeypatch.setenv("FAKE_PPBENCH_NO_MPI", "1")
    spec = write_spec(tmp_path / "s.json", [
        RUN, {**RUN, "name": "m", "workload": "transformer", "launcher": "mpirun"}])
    with pytest.raises(sweep_spec.MachineError, match=r'runs\[1\] \("m"\): "launcher"'):
        sweep.run_sweep(spec, binary, tmp_path / "out")
    # a subset without points under mpirun runs
    counts = sweep.run_sweep(spec, binary, tmp_path / "out", only={"workload": {"mlp"}})
    assert counts["ok"] == 1 and not fake_mpirun.exists()
    both = write_spec(tmp_path / "both.json", [BOTH])
    with pytest.raises(sweep_spec.MachineError, match=r'the mpirun points of runs\[0\]'):
        sweep.run_sweep(both, binary, tmp_path / "both")


# --- 11: workload flags with quoted values ---------------------------------------------------

def test_a_quoted_workload_flag_stays_one_word():
    point = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp",
                                   workload_flags="--name 'a b'   --seq 64")
    assert point.workload_flags == "--name 'a b' --seq 64"
    argv = point.argv()
    assert argv[argv.index("--name") + 1] == "a b"
    again = sweep_point.make_point("1f1b", 2, 4, command="run", workload="mlp",
                                   workload_flags=point.workload_flags)
    assert again.key() == point.key()
