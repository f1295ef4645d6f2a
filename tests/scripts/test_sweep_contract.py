"""scripts/sweep.py's contract: the spec checked against its JSON Schema before anything runs,
--ppbench and --timeout checked, exit codes read (never messages), appends under a lock, the CSV
in step with the JSONL, Ctrl-C / SIGTERM, and resume only from records of the same ppbench build
on the same machine."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import results_io
import sweep
import sweep_point
import sweep_records
import sweep_spec
from conftest import FAKE_PPBENCH, ROOT, SCRIPTS, calls

SPECS = ROOT / "benchmarks" / "sweeps"
SCHEMA = SPECS / "sweep.schema.json"


def write_spec(path: Path, runs: list, **top) -> Path:
    path.write_text(json.dumps({"name": "t", **top, "runs": runs}))
    return path


def run_cli(*args: str, env: dict | None = None, python_args: tuple = ()) \
        -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *python_args, str(SCRIPTS / "sweep.py"), *args],
                          capture_output=True, text=True, env=env, check=False)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def csv_points(path: Path) -> list[tuple]:
    with path.open(newline="") as f:
        return [(r["schedule"], r["devices"], r["microbatches"], r["status"])
                for r in csv.DictReader(f)]


def jsonl_points(path: Path) -> list[tuple]:
    return [(r["point"]["schedule"], str(r["point"]["devices"]), str(r["point"]["microbatches"]),
             r["status"]) for r in results_io.load_records(path)]


GOOD = {"schedule": ["gpipe", "1f1b"], "devices": 2, "microbatches": [2, 4]}


# --- 1. the spec and its schema -------------------------------------------------------------

def test_every_spec_in_benchmarks_sweeps_conforms_to_the_schema():
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    specs = sorted(p for p in SPECS.glob("*.json") if p != SCHEMA)
    assert {p.name for p in specs} >= {"theory.json", "cpu.json", "cuda.json"}
    for path in specs:
        spec = json.loads(path.read_text())
        jsonschema.validate(spec, schema, cls=jsonschema.Draft202012Validator)
        assert sweep_spec.schema_problem(spec) is None, path
        sweep_spec.load_spec(path)  # and it expands


def test_the_schema_describes_every_key():
    schema = json.loads(SCHEMA.read_text())
    for key, prop in schema["properties"].items():
        assert prop.get("description"), key
    for kind in ("simulateGroup", "runGroup"):
        for key, prop in schema["$defs"][kind]["properties"].items():
            assert sweep_spec.key_description(schema, {"command": "run"} if kind == "runGroup"
                                              else {}, key), (kind, key)
    # the keys sweep.py knows are the keys the schema allows, and no more
    assert set(schema["$defs"]["simulateGroup"]["properties"]) == \
        {"command", *sweep_point.SPEC_KEYS, *sweep_spec.GROUP_META_KEYS}
    assert set(schema["$defs"]["runGroup"]["properties"]) == \
        {*sweep_point.RUN_KEYS, *sweep_spec.RUN_GROUP_META_KEYS}


BAD_SPECS = [
    # (what, spec text, pieces of the one line)
    ("negative devices in a named group",
     json.dumps({"runs": [GOOD, {**GOOD, "name": "big", "devices": [2, -1]}]}),
     ['runs[1] ("big")', 'key "devices"', "(item 1: -1)", "positive integer"]),
    ("an unknown key",
     json.dumps({"runs": [{**GOOD, "micro_batches": 3}]}),
     ["runs[0]", 'unknown key "micro_batches"', "allowed keys for a simulate group",
      "microbatches"]),
    ("a run group without workload",
     json.dumps({"runs": [{**GOOD, "command": "run"}]}),
     ["runs[0]", 'missing key "workload"', "a run group needs", "`--workload`"]),
    ("an unknown command",
     json.dumps({"runs": [{**GOOD, "command": "train"}]}),
     ["runs[0]", 'key "command"', '"train"', '"simulate" (the default when left out) or "run"']),
    ("a negative timeout",
     json.dumps({"timeout": -5, "runs": [GOOD]}),
     ["top level", 'key "timeout"', "-5", "positive, finite number"]),
    ("an infinite timeout",
     '{"timeout": Infinity, "runs": [{"schedule": "gpipe", "devices": 2, "microbatches": 2}]}',
     ["not JSON", "Infinity", "finite"]),
    ("a negative cost",
     json.dumps({"runs": [{**GOOD, "cost": "F=-1,B=2"}]}),
     ["runs[0]", 'key "cost"', '"F=-1,B=2"', "non-negative number"]),
    ("a schedule that is a number",
     json.dumps({"runs": [{**GOOD, "schedule": 3}]}),
     ["runs[0]", 'key "schedule"', "`--schedule`"]),
    ("no runs",
     json.dumps({"name": "x"}),
     ["top level", 'missing key "runs"', "a non-empty list of parameter groups"]),
    ("an empty runs list",
     json.dumps({"runs": []}),
     ['key "runs"', "[]", "a non-empty list"]),
    ("a group that is not an object",
     json.dumps({"runs": [GOOD, 7]}),
     ["runs[1]", "7 is not allowed", "one parameter group"]),
    ("virtual devices on the CPU backend",
     json.dumps({"runs": [{**GOOD, "command": "run", "workload": "mlp", "name": "v",
                           "virtual_devices": True}]}),
     ['runs[0] ("v")', "virtual_devices", "cuda"]),
    ("an unknown launcher",
     json.dumps({"runs": [{**GOOD, "command": "run", "workload": "mlp", "launcher": "srun"}]}),
     ["runs[0]", 'key "launcher"', '"srun"', '"threads"', '"mpirun"']),
    ("no replicas",
     json.dumps({"runs": [{**GOOD, "command": "run", "workload": "mlp", "launcher": "mpirun",
                           "replicas": 0}]}),
     ["runs[0]", 'key "replicas"', "0", "`--dp`", "positive integer"]),
    ("replicas in threads",
     json.dumps({"runs": [{**GOOD, "command": "run", "workload": "mlp", "name": "dp",
                           "replicas": 2}]}),
     ['runs[0] ("dp")', "'replicas' 2", '"launcher": "mpirun"']),
    ("mpirun with a placement of threads",
     json.dumps({"runs": [{**GOOD, "command": "run", "workload": "mlp", "backend": "cuda",
                           "gpus": True, "launcher": "mpirun"}]}),
     ["runs[0]", '"mpirun" puts each process on the GPU of its local rank', "'gpus'"]),
    ("gpus on the CPU backend",
     json.dumps({"runs": [{**GOOD, "command": "run", "workload": "mlp", "name": "g",
                           "gpus": True}]}),
     ['runs[0] ("g")', "'gpus'", "cuda"]),
    ("no GPUs asked for",
     json.dumps({"runs": [{**GOOD, "command": "run", "workload": "mlp", "min_gpus": 0}]}),
     ["runs[0]", 'key "min_gpus"', "0"]),
    ("launcher in a simulate group",
     json.dumps({"runs": [{**GOOD, "launcher": "mpirun"}]}),
     ["runs[0]", 'unknown key "launcher"', "a simulate group"]),
    ("not JSON at all",
     "{runs: [",
     ["not JSON", "line 1"]),
]


@pytest.mark.parametrize("what, text, pieces", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_a_malformed_spec_is_one_line_naming_file_group_and_key_and_exit_2(
        tmp_path, fake_ppbench, what, text, pieces):
    binary, log = fake_ppbench
    spec = tmp_path / "bad-spec.json"
    spec.write_text(text)
    run = run_cli(str(spec), "--ppbench", binary, "--out", str(tmp_path / "out"))
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"sweep: {spec}: ")
    for piece in pieces:
        assert piece in lines[0], (piece, lines[0])
    # checked before anything runs: ppbench was not called, nothing was written
    assert calls(log, probes=True) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("out")]


def test_a_spec_file_that_does_not_exist_is_exit_2(tmp_path, fake_ppbench):
    run = run_cli(str(tmp_path / "absent.json"), "--ppbench", fake_ppbench[0], "--out",
                  str(tmp_path / "out"))
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1
    assert "absent.json: no such file" in run.stderr


@pytest.mark.parametrize("value", ["-1", "0", "inf", "nan", "-inf", "soon"])
def test_the_timeout_option_must_be_positive_and_finite(tmp_path, fake_ppbench, value):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    run = run_cli(str(spec), "--ppbench", binary, "--out", str(tmp_path / "out"),
                  f"--timeout={value}")
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.splitlines()) == 1 and "--timeout" in run.stderr
    assert "positive" in run.stderr and "Traceback" not in run.stderr
    assert calls(log, probes=True) == []
    with pytest.raises(sweep_spec.SpecError, match="positive"):
        sweep.run_sweep(spec, binary, tmp_path / "out", timeout=float(value)
                        if value != "soon" else -1.0)


def test_without_jsonschema_the_sweep_says_how_to_install_it_and_exits_3(tmp_path, fake_ppbench):
    spec = write_spec(tmp_path / "s.json", [GOOD])
    # jsonschema made unimportable (sys.modules[name] = None), then the script run as __main__
    code = ("import runpy, sys; sys.modules['jsonschema'] = None; "
            f"sys.path.insert(0, {str(SCRIPTS)!r}); sys.argv = sys.argv[1:]; "
            f"runpy.run_path({str(SCRIPTS / 'sweep.py')!r}, run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", code, "sweep.py", str(spec), "--ppbench",
                          fake_ppbench[0], "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 3, run.stderr
    assert len(run.stderr.splitlines()) == 1 and "Traceback" not in run.stderr
    assert "jsonschema" in run.stderr and "pip install -r scripts/requirements.txt" in run.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_jsonschema_is_a_requirement():
    lines = (SCRIPTS / "requirements.txt").read_text().splitlines()
    assert any(req.split(">")[0].split("=")[0].strip() == "jsonschema" for req in lines)


# --- 1. --ppbench -------------------------------------------------------------------------------

def test_a_ppbench_that_does_not_exist_is_exit_2_before_any_point(tmp_path):
    spec = write_spec(tmp_path / "s.json", [GOOD])
    run = run_cli(str(spec), "--ppbench", str(tmp_path / "no-such-ppbench"), "--out",
                  str(tmp_path / "out"))
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        f"sweep: --ppbench {tmp_path / 'no-such-ppbench'}: no such file (build it first: make)"]
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("kind", ["not executable", "not a program", "a directory"])
def test_a_ppbench_that_exists_but_cannot_run_is_exit_3(tmp_path, kind):
    spec = write_spec(tmp_path / "s.json", [GOOD])
    binary = tmp_path / "ppbench"
    if kind == "a directory":
        binary.mkdir()
    else:
        binary.write_bytes(b"\x7fELF garbage, not a program")
        binary.chmod(0o644 if kind == "not executable" else 0o755)
    run = run_cli(str(spec), "--ppbench", str(binary), "--out", str(tmp_path / "out"))
    assert run.returncode == 3, run.stderr
    assert len(run.stderr.splitlines()) == 1 and f"--ppbench {binary}" in run.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_ppbench_that_reports_a_machine_problem_on_the_probe_is_exit_3(tmp_path):
    binary = tmp_path / "ppbench"
    binary.write_text("#!/bin/sh\necho 'ppbench: error: libcublasLt.so.13 missing' >&2\nexit 3\n")
    binary.chmod(0o755)
    spec = write_spec(tmp_path / "s.json", [GOOD])
    run = run_cli(str(spec), "--ppbench", str(binary), "--out", str(tmp_path / "out"))
    assert run.returncode == 3 and "libcublasLt.so.13 missing" in run.stderr
    assert len(run.stderr.splitlines()) == 1
    assert not (tmp_path / "out.jsonl").exists()


# --- 1. exit codes decide, never messages -------------------------------------------------------

def fake_with_exit(tmp_path: Path, code: int, message: str) -> str:
    """A ppbench that answers the probe like the fake and every point with exit `code`."""
    binary = tmp_path / "ppbench-exit"
    binary.write_text(f"""#!/bin/sh
case "$*" in
  *"--schedule naive --devices 1 --microbatches 1"*|--version)
    exec '{sys.executable}' '{FAKE_PPBENCH}' "$@" ;;
esac
echo '{message}' >&2
exit {code}
""")
    binary.chmod(0o755)
    return str(binary)


@pytest.mark.parametrize("code, message, status, retried", [
    (3, "invalid parameters: this message says invalid, the exit code says machine", "error", True),
    (2, "no CUDA device visible (the message says machine, the exit code says invalid)",
     "invalid", False),
    (1, "invalid parameters (but exit 1)", "error", True),
    (134, "Aborted", "error", True),
])
def test_the_exit_code_decides_the_row_never_the_message(tmp_path, code, message, status,
                                                         retried):
    binary = fake_with_exit(tmp_path, code, message)
    spec = write_spec(tmp_path / "s.json", [{"schedule": "gpipe", "devices": 2,
                                             "microbatches": 2}])
    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts[status] == 1
    row = read_jsonl(tmp_path / "out.jsonl")[0]
    assert row["status"] == status and row["exit_code"] == code
    again = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert again["skipped"] == (0 if retried else 1)


# --- 1. appends under a lock, the CSV in step ------------------------------------------------

def test_every_record_is_appended_by_one_locked_write(tmp_path, fake_ppbench, monkeypatch):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    appends, locks, writes = [], [], []
    real_append = sweep_records.append_jsonl  # Records.put's append
    real_flock, real_write = results_io.fcntl.flock, os.write

    def append(path, row):
        appends.append(row["point"]["microbatches"])
        return real_append(path, row)

    def flock(fd, op):
        locks.append(op)
        return real_flock(fd, op)

    def write(fd, data):
        if isinstance(data, bytes) and data.startswith(b'{"'):
            writes.append(data)
        return real_write(fd, data)

    monkeypatch.setattr(sweep_records, "append_jsonl", append)
    monkeypatch.setattr(results_io.fcntl, "flock", flock)
    monkeypatch.setattr(results_io.os, "write", write)
    sweep.run_sweep(spec, binary, tmp_path / "out")
    assert len(appends) == 4 and locks.count(results_io.fcntl.LOCK_EX) >= 4
    assert len(writes) == 4 and all(w.endswith(b"\n") and w.count(b"\n") == 1 for w in writes)
    assert len(read_jsonl(tmp_path / "out.jsonl")) == 4


def append_many(path: str, tag: str, n: int) -> None:
    for i in range(n):
        results_io.append_jsonl(Path(path), {"tag": tag, "i": i, "pad": "x" * 5000})


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "shared.jsonl"
    code = (f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); "
            f"sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "from test_sweep_contract import append_many; append_many(*sys.argv[1:3], 200)")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), tag]) for tag in "ab"]
    assert [p.wait() for p in procs] == [0, 0]
    rows = read_jsonl(path)  # every line whole JSON
    assert sorted((r["tag"], r["i"]) for r in rows) == sorted(
        (t, i) for t in "ab" for i in range(200))


def test_an_append_after_a_torn_line_starts_on_a_new_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"point": {"a": 1}, "status": "ok"}\n{"point": {"a": 2}, "sta')
    results_io.append_jsonl(path, {"point": {"a": 3}, "status": "ok"})
    rows = results_io.load_rows(path)
    assert [r["point"]["a"] for r in rows] == [1, 3]


def test_the_csv_matches_the_jsonl_after_every_point(tmp_path, fake_ppbench, monkeypatch):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [{"schedule": ["gpipe", "1f1b", "crash"],
                                             "devices": [2, 4], "microbatches": [1, 4]}])
    seen = []
    real = sweep.run_point

    def checking(*args, **kwargs):
        jsonl, table = tmp_path / "out.jsonl", tmp_path / "out.csv"
        if jsonl.exists():
            seen.append(len(jsonl_points(jsonl)))
            assert sorted(csv_points(table)) == sorted(jsonl_points(jsonl))
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "run_point", checking)
    sweep.run_sweep(spec, binary, tmp_path / "out")
    assert seen == list(range(0, 12))
    # a second sweep retries the 4 error rows: appended again, still one CSV row per point
    seen.clear()
    sweep.run_sweep(spec, binary, tmp_path / "out")
    assert seen == [12] * 4
    assert sorted(csv_points(tmp_path / "out.csv")) == sorted(jsonl_points(tmp_path / "out.jsonl"))
    assert len(read_jsonl(tmp_path / "out.jsonl")) == 12  # compacted at the end


# --- 1. Ctrl-C and SIGTERM -------------------------------------------------------------------

@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                          (signal.SIGHUP, 129)])
def test_a_signal_kills_the_running_point_and_leaves_whole_records(tmp_path, fake_ppbench,
                                                                   monkeypatch, signum, code):
    binary, _ = fake_ppbench
    pidfile = tmp_path / "slow.pid"
    monkeypatch.setenv("FAKE_PPBENCH_PIDFILE", str(pidfile))
    spec = write_spec(tmp_path / "s.json", [
        {"schedule": "gpipe", "devices": 2, "microbatches": [2, 4]},
        {"schedule": "slow", "devices": 2, "microbatches": 2},
        {"schedule": "gpipe", "devices": 2, "microbatches": 8}])
    prefix = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "sweep.py"), str(spec), "--ppbench",
                             binary, "--out", str(prefix)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    slow_pid = int(pidfile.read_text())
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert err.splitlines() == [
        f"sweep: interrupted after 2 of 4 points; records in {prefix}.jsonl"]
    assert "Traceback" not in out + err
    with pytest.raises(ProcessLookupError):  # the running point's process was killed
        os.kill(slow_pid, 0)
    rows = read_jsonl(prefix.with_suffix(".jsonl"))  # every line whole
    assert [(r["point"]["schedule"], r["point"]["microbatches"]) for r in rows] == [
        ("gpipe", 2), ("gpipe", 4)]
    assert sorted(csv_points(prefix.with_suffix(".csv"))) == sorted(
        jsonl_points(prefix.with_suffix(".jsonl")))
    summary = json.loads(prefix.with_name("out.summary.json").read_text())
    assert summary["interrupted"] is True and summary["ok"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# --- 2. resume only from the same ppbench build on the same machine ----------------------------

def test_records_of_another_commit_are_not_taken_for_this_run(tmp_path, fake_ppbench,
                                                              monkeypatch):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    monkeypatch.setenv("FAKE_PPBENCH_COMMIT", "aaaa111")
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["ok"] == 4
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 4  # same commit: resumed
    monkeypatch.setenv("FAKE_PPBENCH_COMMIT", "bbbb222")
    before = len(calls(log))
    counts = sweep.run_sweep(spec, binary, tmp_path / "out")
    assert counts["skipped"] == 0 and len(calls(log)) - before == 4
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert len(rows) == 4 and {r["recorded_by"]["git_commit"] for r in rows} == {"bbbb222"}
    previous = read_jsonl(tmp_path / "out.previous.jsonl")
    assert len(previous) == 4 and {r["recorded_by"]["git_commit"] for r in previous} == {"aaaa111"}


def test_records_of_a_dirty_tree_resume_only_with_the_same_binary(tmp_path, fake_ppbench,
                                                                  monkeypatch):
    binary, log = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    monkeypatch.setenv("FAKE_PPBENCH_COMMIT", "aaaa111-dirty")
    sweep.run_sweep(spec, binary, tmp_path / "out")
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 4  # the same binary
    Path(binary).write_text(Path(binary).read_text() + "# rebuilt\n")  # same commit text
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 0
    # ppbench hands CUDA runs to ppbench-cuda beside it: rebuilding that one alone is a new binary
    cuda = Path(binary).with_name("ppbench-cuda")
    cuda.write_text("#!/bin/sh\n")
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 0
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 4
    cuda.write_text("#!/bin/sh\n# rebuilt\n")
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 0


def test_records_of_another_machine_are_not_taken_for_this_run(tmp_path, fake_ppbench,
                                                               monkeypatch):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD])
    monkeypatch.setenv("FAKE_PPBENCH_HOST", "laptop")
    sweep.run_sweep(spec, binary, tmp_path / "out")
    monkeypatch.setenv("FAKE_PPBENCH_HOST", "server")
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 0
    monkeypatch.setenv("FAKE_PPBENCH_GPU", "1")  # the same host with a GPU now
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 0
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 4
    # The same binary and GPU on a newer driver: the GPU's numbers may differ.
    monkeypatch.setenv("FAKE_PPBENCH_DRIVER", "13.1")
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 0
    assert sweep.run_sweep(spec, binary, tmp_path / "out")["skipped"] == 4


def test_the_committed_reference_records_never_stand_in_for_a_run(tmp_path, fake_ppbench):
    """The bug: on a fresh clone every point was 'already recorded' by the committed records."""
    binary, log = fake_ppbench
    reference = ROOT / "results" / "reference" / "theory.jsonl"
    prefix = tmp_path / "theory"
    prefix.with_suffix(".jsonl").write_text(reference.read_text())
    spec = json.loads((SPECS / "theory.json").read_text())
    spec["runs"] = [{**spec["runs"][0], "schedule": ["gpipe", "1f1b"], "devices": [2, 4],
                     "microbatches": [4, 8]}]
    path = tmp_path / "theory-spec.json"
    path.write_text(json.dumps(spec))
    counts = sweep.run_sweep(path, binary, prefix)
    assert counts["skipped"] == 0 and counts["ok"] == 8 and len(calls(log)) == 8
    assert len(read_jsonl(prefix.with_suffix(".jsonl"))) == 8
    assert len(read_jsonl(tmp_path / "theory.previous.jsonl")) == len(
        reference.read_text().splitlines())


def test_a_second_sweep_into_the_same_prefix_is_refused_with_exit_3(tmp_path, fake_ppbench):
    import fcntl

    spec = write_spec(tmp_path / "s.json", [GOOD])
    lock = tmp_path / "out.jsonl.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        run = run_cli(str(spec), "--ppbench", fake_ppbench[0], "--out", str(tmp_path / "out"))
    finally:
        os.close(fd)
    assert run.returncode == 3 and "another sweep is writing" in run.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_the_summary_names_counts_machine_commit_report_and_figures(tmp_path, fake_ppbench,
                                                                    monkeypatch):
    binary, _ = fake_ppbench
    spec = write_spec(tmp_path / "s.json", [GOOD], name="theory")
    sweep.run_sweep(spec, binary, tmp_path / "theory")
    sweep.run_sweep(spec, binary, tmp_path / "theory")
    run = run_cli("--summarize", str(tmp_path / "theory"), str(tmp_path / "cpu"),
                  "--report", "results/latest/REPORT.md", "--figures", "plots/latest/")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "bench summary:"
    assert lines[1].startswith("  ppbench at commit fake123 on host testhost, CPU Test CPU "
                               "(2 cores), no GPU visible to ppbench")
    assert lines[2] == (f"  theory: 4 points: 0 simulated, 4 skipped (already recorded), "
                        f"0 invalid, 0 errors -> {tmp_path / 'theory.jsonl'}")
    assert lines[3].startswith("  cpu: not run")
    assert lines[4:] == ["  report: results/latest/REPORT.md", "  figures: plots/latest/"]


def test_a_mixed_sweep_keeps_both_csvs_in_step(tmp_path, fake_ppbench, monkeypatch):
    binary, _ = fake_ppbench
    run_group = {"command": "run", "workload": "mlp", "schedule": ["gpipe", "1f1b"],
                 "devices": 2, "microbatches": [2, 4], "steps": 1}
    spec = write_spec(tmp_path / "s.json", [GOOD, run_group, {**GOOD, "devices": 4}])
    real = sweep.run_point

    def both(prefix: Path) -> list[tuple]:
        found = []
        for path in (prefix.with_suffix(".csv"), prefix.with_name("out-run.csv")):
            if path.exists():
                found += csv_points(path)
        return sorted(found)

    def checking(*args, **kwargs):
        assert both(tmp_path / "out") == sorted(jsonl_points(tmp_path / "out.jsonl"))
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "run_point", checking)
    sweep.run_sweep(spec, binary, tmp_path / "out")
    assert both(tmp_path / "out") == sorted(jsonl_points(tmp_path / "out.jsonl"))
    with (tmp_path / "out-run.csv").open() as f:
        assert list(next(csv.reader(f))) == list(sweep_records.RUN_CSV_COLUMNS)
