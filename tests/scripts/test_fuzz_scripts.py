"""The fuzzing scripts' own checks: fuzz_cli.py's reading of an exit as a broken contract, its
reading of --help, fuzz.sh's refusal of bad arguments (docs/testing.md, "Fuzzing"), and
explore_runs.py's cases and its reading of a run's record ("Exploring runs")."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from types import SimpleNamespace

import explore_runs
import fuzz_cli
from conftest import SCRIPTS


def result(code: int, stdout: str = "", stderr: str = "") -> SimpleNamespace:
    return SimpleNamespace(returncode=code, stdout=stdout, stderr=stderr)


def test_contract_accepts_what_ppbench_promises():
    assert fuzz_cli.broken(result(0, stdout="table\n")) is None
    assert fuzz_cli.broken(result(1, stderr="ppbench: error: step stalled\n")) is None
    assert fuzz_cli.broken(result(2, stderr="ppbench: error: --devices: '0' is out of range\n")) \
        is None
    assert fuzz_cli.broken(result(3, stderr="ppbench: error: no GPU visible\n")) is None


def test_contract_names_each_way_to_break_it():
    assert "signal 11" in fuzz_cli.broken(result(-11))
    assert "exit code 134" in fuzz_cli.broken(result(134))
    assert fuzz_cli.broken(result(1, stderr="ppbench: internal error: vector\n")) == \
        "internal error"
    assert "exactly one" in fuzz_cli.broken(result(2, stderr="ppbench: error: a\nsecond line\n"))
    assert "exactly one" in fuzz_cli.broken(result(2, stderr="terminate called\n"))
    assert "stdout" in fuzz_cli.broken(result(2, stdout="half a table",
                                              stderr="ppbench: error: x\n"))
    assert "bare conversion message" in fuzz_cli.broken(
        result(2, stderr="ppbench: error: Could not convert: --x = y\n"))


def test_options_are_read_from_help(tmp_path):
    fake = tmp_path / "ppbench"
    fake.write_text("#!/bin/sh\ncat <<'HELP'\nOptions:\n"
                    "  -h,--help                   Print this help message and exit\n"
                    "  -d,--devices,--pp INT:INT in [1, 4096]\n"
                    "  --format TEXT:{text, json}  text or json\n"
                    "  --check                     Also compute the step\n"
                    "  --lr FLOAT:NUMBER in [1e-12, 1000]\nHELP\n")
    fake.chmod(0o755)
    options = fuzz_cli.options_of(str(fake), "run")
    assert options == [(["-d", "--devices", "--pp"], "INT", []),
                       (["--format"], "TEXT", ["text", "json"]),
                       (["--check"], "FLAG", []),
                       (["--lr"], "FLOAT", [])]


def test_fuzz_sh_refuses_bad_arguments_with_exit_2():
    for args in (["abc"], ["0"], ["5", "no_such_target"]):
        r = subprocess.run([str(SCRIPTS / "fuzz.sh"), *args], capture_output=True, text=True)
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_fuzz_cli_refuses_a_missing_program():
    r = subprocess.run([sys.executable, str(SCRIPTS / "fuzz_cli.py"), "/nonexistent/ppbench"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "not an executable program" in r.stderr


def record(**memory_overrides) -> str:
    ranks = [{"rank": 0,
              "measured": {"params": 8.0, "grads": 8.0, "optimizer": 16.0, "activations": 32.0,
                           "comm": 4.0},
              "model": {"params": 8, "grads": 8, "optimizer": 16, "activations": 32, "comm": 8}}]
    ranks[0]["measured"].update(memory_overrides)
    return json.dumps({"check": {"passed": True}, "memory": {"ranks": ranks}})


def test_explore_runs_accepts_a_step_that_keeps_every_promise():
    assert explore_runs.judge(0, record(), "") is None
    assert explore_runs.judge(2, "", "ppbench: error: 1f1b needs N >= D\n") is None


def test_explore_runs_names_each_broken_promise():
    assert "check failed" in explore_runs.judge(
        0, json.dumps({"check": {"passed": False, "max_rel_error": 0.1}}), "")
    assert "measured activations 16, modelled 32" in explore_runs.judge(0, record(activations=16),
                                                                        "")
    assert "in flight" in explore_runs.judge(0, record(comm=9.0), "")
    assert explore_runs.judge(1, "", "ppbench: error: rank 1: batchnorm\n") == "exit code 1"
    assert "exactly one" in explore_runs.judge(2, "", "ppbench: error: a\nb\n")
    assert "JSON" in explore_runs.judge(0, "table", "")
    # mpirun's banner around a refused job is mpirun's; ppbench's own line still counts alone.
    banner = "-----\nmpirun detected that one or more processes exited with non-zero status\n"
    assert explore_runs.judge(2, "", "ppbench: error: bad --pp\n" + banner, mpirun=True) is None
    assert "exactly one" in explore_runs.judge(2, "", "ppbench: error: bad --pp\n" + banner)
    assert "exactly one" in explore_runs.judge(
        2, "", "ppbench: error: a\nppbench: error: a\n" + banner, mpirun=True)


def job_record(makespan_s: float = 0.01, uncertainty_s: float = 5e-6) -> str:
    procs = [{"process": w, "clock_offset_uncertainty_s": uncertainty_s if w else 0.0}
             for w in range(2)]
    return json.dumps({"check": {"passed": True}, "memory": {"ranks": []},
                       "data_parallel": {"makespan_s": makespan_s, "per_process": procs}})


def handover(dur_us: float) -> dict:
    return {"traceEvents": [{"ph": "X", "cat": "comm", "name": "F0.0 0->1", "ts": 10.0,
                             "dur": dur_us, "args": {"src": 0, "dst": 1}}]}


def test_explore_runs_holds_processes_to_one_timeline():
    # A hand-over may look as much shorter than zero as its two clocks' uncertainties (5 us and
    # 0 here, plus 1 us each of rounding): no more.
    assert explore_runs.judge(0, job_record(), "", mpirun=True, trace=handover(-6.5)) is None
    assert "beyond its clocks' uncertainty" in explore_runs.judge(
        0, job_record(), "", mpirun=True, trace=handover(-7.5))
    assert "are the clocks on one timeline" in explore_runs.judge(
        0, job_record(makespan_s=1000.2), "", mpirun=True, trace=handover(5))
    assert "no trace" in explore_runs.judge(0, job_record(), "", mpirun=True, trace=None)
    # threads of one process have one clock and no job record
    assert explore_runs.judge(0, record(), "", mpirun=False) is None


def test_explore_runs_spreads_processes_over_two_nodes_only_with_mpirun():
    rng = random.Random(9)
    maps = {explore_runs.draw_case(rng, False, True, nodes=True).map_by for _ in range(40)}
    assert maps == {"slot", "node"}
    assert explore_runs.draw_case(rng, False, True).map_by is None
    assert explore_runs.draw_case(rng, False, False, nodes=True).map_by is None
    r = subprocess.run([sys.executable, str(SCRIPTS / "explore_runs.py"), "ppbench", "--nodes"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "give --mpirun too" in r.stderr


def test_explore_runs_draws_checked_float64_steps():
    rng = random.Random(5)
    for edit in (False, True):
        for mpirun in (False, True):
            for _ in range(50):
                case = explore_runs.draw_case(rng, edit, mpirun)
                assert case.argv[0] == "run"
                assert {"--check", "--dtype", "f64"} <= set(case.argv)
                assert (case.show is not None) == edit
                assert (case.processes > 1) == mpirun
                if mpirun:
                    pp = int(case.argv[case.argv.index("--pp") + 1])
                    dp = int(case.argv[case.argv.index("--dp") + 1])
                    assert case.processes == pp * dp
                if edit:
                    assert "-s" not in case.argv and case.show[:2] == ["show", "-s"]
                if edit and mpirun:
                    # the order to edit has one rank per process of a replica
                    assert case.show[case.show.index("-d") + 1] == str(pp)


def test_explore_runs_edits_keep_every_action():
    shown = "# placement: v-shape\nrank 0: F0.0 F3.0 B3.0 B0.0\nrank 1: F1.0 F2.0 B2.0 B1.0\n"
    for seed in range(30):
        edited = explore_runs.edit_order(random.Random(seed), shown)
        lines = edited.splitlines()
        assert lines[0] == "# placement: v-shape"
        actions = sorted(a for line in lines[1:] for a in line.split(":", 1)[1].split())
        whole = sorted(a for line in shown.splitlines()[1:] for a in line.split(":", 1)[1].split())
        # A split B stands as its I and W; nothing else is lost or made up.
        merged = sorted(("B" + a[1:]) if a[0] == "I" else a for a in actions if a[0] != "W")
        assert merged == whole
