"""The fuzzing scripts' own checks: fuzz_cli.py's reading of an exit as a broken contract, its
reading of --help, its cases, input files, memory cap and time limit, fuzz.sh's refusal of bad
arguments (docs/testing.md, "Fuzzing"), and explore_runs.py's cases and its reading of a run's
record, files and simulation ("Exploring runs")."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from types import SimpleNamespace

import explore_runs
import fuzz_cli
from conftest import SCRIPTS


def result(code: int, stdout: str = "", stderr: str = "") -> SimpleNamespace:
    return SimpleNamespace(returncode=code, stdout=stdout, stderr=stderr)


def test_contract_accepts_what_ppbench_promises(tmp_path):
    assert fuzz_cli.broken(result(0, stdout="table\n")) is None
    assert fuzz_cli.broken(result(2, stderr="ppbench: error: --devices: '0' is out of range\n")) \
        is None
    assert fuzz_cli.broken(result(3, stderr="ppbench: error: no GPU visible\n")) is None
    # exit 3 may follow a report: the record was printed, then an output could not be written
    assert fuzz_cli.broken(result(3, stdout="run 1f1b ...\n", stderr="ppbench: error: cannot "
                                  "write --results '/dev/full': No space left\n")) is None
    # exit 1 where the command line asked for it: a tolerance past reach, a watchdog too short
    failed = "ppbench: error: --check failed: largest relative gradient error 3e-07\n"
    assert fuzz_cli.broken(result(1, stdout="{}", stderr=failed),
                           ["run", "--check", "--check-tolerance", "1e-300"]) is None
    stalled = "ppbench: error: watchdog: rank 1 waited 0.001 s at recv(F0.0<-0)\n"
    assert fuzz_cli.broken(result(1, stderr=stalled), ["run", "--watchdog", "0.001"]) is None
    # --progress's lines come before the one line
    assert fuzz_cli.broken(result(1, stderr="step 1/2: 0.2 ms compute, 0.4 ms wall\n" + stalled),
                           ["run", "--progress", "--watchdog", "0.001"]) is None
    # JSON where it was asked for, and the files written
    assert fuzz_cli.broken(result(0, stdout='{"a": 1}'), ["list", "--format", "json"]) is None
    out = tmp_path / "trace.json"
    out.write_text('{"traceEvents": []}')
    results = tmp_path / "r.jsonl"
    results.write_text('{"a": 1}\n{"a": 2}\n')
    assert fuzz_cli.broken(result(0, stdout="x"), ["run", "--trace-out", str(out), "--results",
                                                   str(results)],
                           {"--trace-out": str(out), "--results": str(results)}) is None
    assert fuzz_cli.broken(result(0, stdout='{"a": 1}\n'), ["run", "--results", "-"]) is None
    # a regular input file refused: exit 2 as for any other bad input
    assert fuzz_cli.broken(result(2, stderr="ppbench: error: x.json: not JSON\n"),
                           ["simulate", "--device-profile", str(out)]) is None
    assert fuzz_cli.broken(result(2, stderr="ppbench: error: '/dev/zero': not a regular file\n"),
                           ["simulate", "--device-profile", "/dev/zero"]) is None


def test_contract_names_each_way_to_break_it(tmp_path):
    assert "signal 11" in fuzz_cli.broken(result(-11))
    assert "exit code 134" in fuzz_cli.broken(result(134))
    assert fuzz_cli.broken(result(1, stderr="ppbench: internal error: vector\n")) == \
        "internal error"
    assert "exactly one" in fuzz_cli.broken(result(2, stderr="ppbench: error: a\nsecond line\n"))
    assert "exactly one" in fuzz_cli.broken(result(2, stderr="terminate called\n"))
    assert "exactly one" in fuzz_cli.broken(result(3, stderr="ppbench: error: a\nb\n"))
    assert "stdout" in fuzz_cli.broken(result(2, stdout="half a table",
                                              stderr="ppbench: error: x\n"))
    assert "bare conversion message" in fuzz_cli.broken(
        result(2, stderr="ppbench: error: Could not convert: --x = y\n"))
    assert "escape" in fuzz_cli.broken(result(2, stderr="ppbench: error: '\x1b[2J'\n"))
    # exit 1: a failed check at the dtype's own tolerance, a stall nobody asked for, a step that
    # failed, and anything else
    failed = "ppbench: error: --check failed: largest relative gradient error 0.1\n"
    assert "failed --check" in fuzz_cli.broken(result(1, stderr=failed), ["run", "--check"])
    stalled = "ppbench: error: watchdog: rank 1 waited 60 s at recv(F0.0<-0)\n"
    assert "stalled" in fuzz_cli.broken(result(1, stderr=stalled), ["run"])
    assert "step failed" in fuzz_cli.broken(
        result(1, stderr="ppbench: error: rank 1: batchnorm over one value\n"), ["run"])
    assert "exactly one" in fuzz_cli.broken(result(1, stderr="step 1/2: 0.2 ms\n" + failed),
                                            ["run", "--check", "--check-tolerance", "1e-300"])
    # exit 0: nothing printed, stdout or a file that is not the JSON asked for
    assert "nothing on stdout" in fuzz_cli.broken(result(0), ["list"])
    assert "not JSON" in fuzz_cli.broken(result(0, stdout="table"), ["list", "--format", "json"])
    assert "not JSON" in fuzz_cli.broken(result(0, stdout='{"a": NaN}'),
                                         ["list", "--format", "json"])
    assert "not JSON" in fuzz_cli.broken(result(0, stdout='{"a": 1}\n{"b": 2}\n'),
                                         ["run", "--trace-out", "-"])
    missing = str(tmp_path / "none.json")
    assert "without the --trace-out file" in fuzz_cli.broken(
        result(0, stdout="x"), ["simulate", "--trace-out", missing], {"--trace-out": missing})
    bad = tmp_path / "r.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n')
    assert "--results file is not JSON" in fuzz_cli.broken(
        result(0, stdout="x"), ["run", "--results", str(bad)], {"--results": str(bad)})
    # exit 2 that wrote its output all the same
    assert "output file written" in fuzz_cli.broken(
        result(2, stderr="ppbench: error: x\n"), ["run", "--results", str(bad)],
        {"--results": str(bad)})
    # an input that is no regular file: refused, not read until memory or time runs out
    assert "not a regular file, yet exit 3" in fuzz_cli.broken(
        result(3, stderr="ppbench: error: out of memory\n"),
        ["simulate", "--device-profile", "/dev/zero"])
    assert "not a regular file, yet exit 0" in fuzz_cli.broken(
        result(0, stdout="x"), ["show", "--schedule-file", str(tmp_path)])


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


def test_explore_runs_draws_checked_steps_of_both_dtypes():
    rng = random.Random(5)
    seen = {"dtype": set(), "seed": set(), "partition": 0, "outputs": 0, "lr": 0}
    for edit in (False, True):
        for mpirun in (False, True):
            for _ in range(50):
                case = explore_runs.draw_case(rng, edit, mpirun)
                assert case.argv[0] == "run"
                assert "--check" in case.argv
                dtype = case.argv[case.argv.index("--dtype") + 1]
                assert dtype in ("f32", "f64")
                seen["dtype"].add(dtype)
                if "--seed" in case.argv:
                    seen["seed"].add(case.argv[case.argv.index("--seed") + 1])
                seen["lr"] += "--lr" in case.argv
                if "--partition" in case.argv:
                    seen["partition"] += case.argv[case.argv.index("--partition") + 1] != \
                        "uniform"
                assert (case.show is not None) == edit
                assert (case.processes > 1) == mpirun
                assert not (mpirun and case.outputs)  # files are written by threaded runs
                seen["outputs"] += case.outputs
                if mpirun:
                    pp = int(case.argv[case.argv.index("--pp") + 1])
                    dp = int(case.argv[case.argv.index("--dp") + 1])
                    assert case.processes == pp * dp
                if edit:
                    assert "-s" not in case.argv and case.show[:2] == ["show", "-s"]
                if edit and mpirun:
                    # the order to edit has one rank per process of a replica
                    assert case.show[case.show.index("-d") + 1] == str(pp)
    assert seen["dtype"] == {"f32", "f64"}
    assert len(seen["seed"]) > 10 and seen["partition"] > 10 and seen["outputs"] > 10
    assert seen["lr"] > 10


def test_explore_runs_partitions_share_out_every_layer():
    assert explore_runs.stages_per_chain("1f1b", 4, 2) == 4
    assert explore_runs.stages_per_chain("interleaved-1f1b", 4, 3) == 12
    assert explore_runs.stages_per_chain("zb-v", 3, 2) == 6
    assert explore_runs.stages_per_chain("chimera", 4, 2) == 4  # per chain
    rng = random.Random(3)
    lists = off = 0
    for _ in range(400):
        stages, layers = rng.randint(1, 8), rng.randint(1, 20)
        flags = explore_runs.partition_flags(rng, stages, layers)
        if not flags or flags[1] == "uniform":
            continue
        counts = [int(c) for c in flags[1].split(",")]
        assert len(counts) == stages and layers >= stages
        lists += 1
        off += sum(counts) != layers or min(counts) < 1  # now and then one that must be refused
    assert lists > 50 and 0 < off < lists / 4


def test_explore_runs_simulates_the_point_it_ran():
    argv = ["run", "-s", "interleaved-1f1b", "-d", "2", "-n", "4", "-v", "3", "-w", "mlp",
            "--layers", "6", "--width", "8", "-b", "2", "--seed", "7", "--optimizer", "sgd",
            "--recompute", "--partition", "1,1,1,1,1,1", "--dtype", "f32", "--check",
            "--format", "json", "--watchdog", "30"]
    assert explore_runs.simulate_argv(argv, "p.json") == [
        "simulate", "-s", "interleaved-1f1b", "-d", "2", "-n", "4", "-v", "3", "-w", "mlp",
        "--layers", "6", "--width", "8", "-b", "2", "--partition", "1,1,1,1,1,1", "--dtype",
        "f32", "--device-profile", "p.json", "--format", "json"]
    mpi = ["run", "--schedule-file", "e.txt", "--pp", "2", "--dp", "2", "--dp-overlap", "-w",
           "mlp", "--layers", "4"]
    assert explore_runs.simulate_argv(mpi) == [
        "simulate", "--schedule-file", "e.txt", "--pp", "2", "--dp", "2", "--dp-overlap", "-w",
        "mlp", "--layers", "4", "--format", "json"]


def run_record(**over) -> dict:
    rec = {"schedule": "1f1b", "devices": 2, "microbatches": 4, "actions": 16, "chunks": 1,
           "stages": 2, "partition": {"layer_counts": [2, 2], "method": "explicit"},
           "memory": {"ranks": [{"model": {"activations": 64}}, {"model": {"activations": 32}}]}}
    rec.update(over)
    return rec


def sim_record(**over) -> dict:
    rec = {"schedule": "1f1b", "devices": 2, "microbatches": 4, "actions": 16, "chunks": 1,
           "stages": 2, "partition": {"layer_counts": [2, 2], "method": "explicit"},
           "activation_memory": {"ranks": [{"peak_bytes": 64.0}, {"peak_bytes": 32.0}]}}
    rec.update(over)
    return rec


def test_explore_runs_holds_the_run_to_its_simulation_and_files():
    judge = explore_runs.judge_simulation
    assert judge(run_record(), sim_record(), recompute=False) is None
    assert "actions 16, simulate 12" in judge(run_record(), sim_record(actions=12), False)
    assert "partition" in judge(run_record(), sim_record(
        partition={"layer_counts": [3, 1]}), False)
    other_peaks = sim_record(activation_memory={"ranks": [{"peak_bytes": 64}, {"peak_bytes": 8}]})
    assert "activation peaks" in judge(run_record(), other_peaks, False)
    # what simulate does not model, or plans again for its own costs
    assert judge(run_record(), other_peaks, recompute=True) is None
    assert judge(run_record(schedule="zb-1p"), dict(other_peaks, schedule="zb-1p"), False) is None
    record = run_record()
    line = json.dumps(record) + "\n"
    profile = {"kind": "measured", "layer_counts": [2, 2], "stages": [{}, {}]}
    assert explore_runs.judge_outputs(record, line, profile) is None
    assert "--results holds 2 line(s)" in explore_runs.judge_outputs(record, line * 2, profile)
    assert "not the record" in explore_runs.judge_outputs(
        record, json.dumps(run_record(actions=3)), profile)
    assert "--profile-out" in explore_runs.judge_outputs(
        record, line, dict(profile, layer_counts=[3, 1]))


def test_fuzz_cli_writes_sound_and_malformed_inputs(tmp_path):
    import stat
    files = fuzz_cli.write_inputs(str(tmp_path))
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode)
    for path in files.base.values():
        assert os.path.getsize(path) > 0
    assert json.loads((tmp_path / "ok-rates.json").read_text())["kind"] == "rates"
    assert "1e400" in (tmp_path / "overflow-1e400.json").read_text()
    assert (tmp_path / "deep-array.json").read_text().startswith("[" * 1000)
    assert b"\x00\xff" in (tmp_path / "binary.txt").read_bytes()
    assert len(files.schedules) > 20 and len(files.profiles) > 20
    assert any(n.endswith(".csv") and not n.startswith("ok-") for n in files.schedules)


def fuzz_options():
    return [(["-s", "--schedule"], "TEXT", []), (["--schedule-file"], "TEXT", []),
            (["-d", "--devices", "--pp"], "INT", []), (["-n", "--microbatches"], "INT", []),
            (["-v", "--chunks"], "INT", []), (["--memory-limit"], "FLOAT", []),
            (["--width"], "INT", []), (["--seq"], "INT", []), (["--steps"], "INT", []),
            (["--format"], "TEXT", ["text", "json"]), (["--check"], "FLAG", []),
            (["--trace-out"], "TEXT", []), (["--device-profile"], "TEXT", [])]


def test_fuzz_cli_cases_change_a_valid_command_line(tmp_path):
    files = fuzz_cli.write_inputs(str(tmp_path))
    files.tmp, files.fresh = str(tmp_path), 0
    rng = random.Random(4)
    bases = [[a.format(**files.base) if a.startswith("{") else a for a in b]
             for b in fuzz_cli.BASES["run"]]
    one_change = 0
    for _ in range(400):
        argv = fuzz_cli.make_case(rng, "run", fuzz_options(), files)
        assert argv[0] == "run"
        # at most one large value, so that a case stays small
        assert sum(fuzz_cli.is_large(a) for a in argv) <= 1, argv
        one_change += any(len(set(argv[1:]) ^ set(b)) <= 2 for b in bases)
    assert one_change > 100
    # a schedule file names D and N: the family's flags go
    for seed in range(50):
        argv = fuzz_cli.make_case(random.Random(seed), "run", [(["--schedule-file"], "TEXT", [])],
                                  files)
        if "--schedule-file" in argv:
            assert not {"-s", "--schedule", "-d", "-n", "-v"} & set(argv), argv


def test_fuzz_cli_changes_meant_to_pass_bring_what_they_need(tmp_path):
    files = fuzz_cli.write_inputs(str(tmp_path))
    files.tmp, files.fresh = str(tmp_path), 0
    rng = random.Random(2)
    for _ in range(50):
        argv = ["--workload", "mlp", "-s", "1f1b", "-d", "2", "-n", "4"]
        fuzz_cli.change(rng, "run", argv, [(["--memory-limit"], "FLOAT", [])], files, True, False)
        assert fuzz_cli.value_of(argv, "--memory-limit") in fuzz_cli.GOOD["--memory-limit"]
        assert fuzz_cli.value_of(argv, "-s") in ("zb-1p", "zb-2p") and argv.count("-s") == 1
        argv = ["--workload", "mlp", "-s", "1f1b"]
        fuzz_cli.change(rng, "run", argv, [(["--check-tolerance"], "FLOAT", [])], files, True,
                        False)
        assert "--check" in argv
    # one that does not fit the command line is not drawn: --hidden is a transformer's
    argv = ["--workload", "mlp"]
    options = [(["--hidden"], "INT", []), (["--width"], "INT", [])]
    for _ in range(20):
        fuzz_cli.change(rng, "model", argv, options, files, True, False)
    assert "--hidden" not in argv and "--width" in argv


def test_fuzz_cli_caps_the_address_space():
    r = subprocess.run([sys.executable, "-c", "b = bytearray(3 << 30)"], capture_output=True,
                       text=True, preexec_fn=fuzz_cli.address_space(1 << 30))
    assert r.returncode != 0 and "MemoryError" in r.stderr


HELP = """Options:
  -h,--help                   Print this help message and exit
  --format TEXT:{text, json}  text or json
"""


def test_fuzz_cli_counts_a_hang_as_a_finding(tmp_path):
    fake = tmp_path / "ppbench"
    fake.write_text("#!/bin/sh\nif [ \"$2\" = --help ]; then cat <<'HELP'\n" + HELP +
                    "HELP\nexit 0; fi\nexec sleep 60\n")
    fake.chmod(0o755)
    r = subprocess.run([sys.executable, str(SCRIPTS / "fuzz_cli.py"), str(fake), "--command",
                        "list", "--cases", "1", "--timeout", "0.5"], capture_output=True,
                       text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "past its time limit of 0.5 s" in r.stdout
    assert "1 broke the contract" in r.stdout


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
