"""Every script's command line keeps ppbench's contract (scripts/script_cli.py): a bad option is
one line on stderr naming it and exit 2, --help is exit 0, and the shared readers and option
types name what is wrong instead of raising a traceback."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

import script_cli
from script_cli import InputError, MachineError

# Every script a user runs: the files of scripts/ and benchmarks/ with a __main__ block.
ENTRY_POINTS = sorted(p.relative_to(ROOT).as_posix()
                      for folder in ("scripts", "benchmarks") for p in (ROOT / folder).glob("*.py")
                      if 'if __name__ == "__main__"' in p.read_text(encoding="utf-8"))


def run_script(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPLBACKEND="Agg")
    env.pop("PPBENCH_TRACEBACK", None)
    return subprocess.run([sys.executable, str(ROOT / script), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env, check=False)


def test_the_entry_points_are_found():
    # The glob must see the scripts, or the tests below would pass over nothing.
    assert "scripts/sweep.py" in ENTRY_POINTS and "scripts/report.py" in ENTRY_POINTS
    assert len(ENTRY_POINTS) >= 25


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_an_unknown_option_is_one_line_and_exit_2(script: str):
    done = run_script(script, "--no-such-option")
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert "--no-such-option" in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_help_is_exit_0(script: str):
    done = run_script(script, "--help")
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


# --- the shared pieces ---------------------------------------------------------------------

@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_a_stdout_that_cannot_take_the_output_is_exit_3(script: str):
    # /dev/full: every write fails with ENOSPC, as on a full disk. The contract's one line and
    # the machine's exit code, not a traceback or Python's exit 120.
    env = dict(os.environ, MPLBACKEND="Agg")
    env.pop("PPBENCH_TRACEBACK", None)
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, str(ROOT / script), "--help"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60, cwd=ROOT, env=env)
    assert r.returncode == 3, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "No space left" in r.stderr, r.stderr


def test_number_names_the_value_and_the_range():
    positive = script_cli.number(int, 1)
    assert positive("3") == 3
    for text, words in [("0", "0 is out of range (allowed: >= 1)"), ("x", "'x' is not a whole"),
                        ("1.5", "'1.5' is not a whole")]:
        with pytest.raises(argparse.ArgumentTypeError, match=words.replace("(", r"\(")
                           .replace(")", r"\)")):
            positive(text)
    fraction = script_cli.number(float, 0, 1, low_open=True)
    assert fraction("1") == 1.0
    for text in ("0", "1.01", "nan", "inf", "-inf", "1e400"):
        with pytest.raises(argparse.ArgumentTypeError):
            fraction(text)


def test_a_program_s_output_gives_its_first_and_last_non_blank_line():
    text = "\n  ppbench: error: --devices 0 is not in 1..4096  \n\nat exit\n \n"
    assert script_cli.first_line(text) == "ppbench: error: --devices 0 is not in 1..4096"
    assert script_cli.last_line(text) == "at exit"
    assert script_cli.first_line(" \n\n") == script_cli.last_line("") == "no message"
    assert script_cli.first_line("", "unknown") == "unknown"


def test_number_list_takes_commas_and_refuses_an_empty_list():
    parse = script_cli.number_list(int, 1)
    assert parse("1, 4,32") == [1, 4, 32]
    for text in (",", "", "1,0", "1,x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_read_json_names_the_file_and_what_is_wrong(tmp_path: Path):
    good = tmp_path / "good.json"
    good.write_text('{"a": 1}')
    assert script_cli.read_json(good, "table") == {"a": 1}
    cases = {
        "missing": (tmp_path / "nope.json", "no such file"),
        "folder": (tmp_path, "is a folder"),
        "not json": (tmp_path / "bad.json", "not JSON (line 1 column 2"),
        "not utf-8": (tmp_path / "latin.json", "not UTF-8 text"),
        "an array": (tmp_path / "list.json", "a JSON object was expected, not array"),
        "too deep": (tmp_path / "deep.json", "not JSON this program can read (nested too deep)"),
    }
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "latin.json").write_bytes(b'\xff\xfe{"a": 1}')
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    for name, (path, words) in cases.items():
        with pytest.raises(InputError) as e:
            script_cli.read_json(path, "table")
        assert words in str(e.value), name
        assert str(path) in str(e.value), name


def test_parse_json_keeps_a_refused_constant_s_reason():
    def finite_only(name: str) -> float:
        raise ValueError(f"{name} is not a finite number")

    assert math.isnan(script_cli.parse_json("NaN", "x"))  # json.loads' own default
    with pytest.raises(InputError, match=r"^spec s.json: not JSON \(NaN is not a finite number\)$"):
        script_cli.parse_json('{"a": NaN}', "spec s.json", parse_constant=finite_only)


def test_shaped_turns_a_wrong_field_into_an_input_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PPBENCH_TRACEBACK", raising=False)
    with pytest.raises(InputError, match=r"records x.jsonl: not of the shape expected \(no field "
                                         r"'columns'\)"):
        with script_cli.shaped("records x.jsonl"):
            {}["columns"]  # noqa: B018 - the lookup is the point
    with pytest.raises(InputError, match="TypeError"):
        with script_cli.shaped("table"):
            len(5)  # type: ignore[arg-type]
    # For whoever changes a script: the traceback itself on request.
    monkeypatch.setenv("PPBENCH_TRACEBACK", "1")
    with pytest.raises(KeyError):
        with script_cli.shaped("table"):
            {}["columns"]  # noqa: B018


def test_output_path_is_checked_before_the_work(tmp_path: Path):
    assert script_cli.output_path(tmp_path / "new" / "out.json") == tmp_path / "new" / "out.json"
    assert (tmp_path / "new").is_dir() and list((tmp_path / "new").iterdir()) == []
    (tmp_path / "a-file").write_text("x")
    for path, words in [(tmp_path, "is a folder"), (tmp_path / "a-file" / "out.json",
                                                    "is not a folder"),
                        (Path("/proc/no-such/out.json"), "cannot write there")]:
        with pytest.raises(InputError, match=words):
            script_cli.output_path(path, "--out")
    with pytest.raises(InputError, match="exists and is not a folder"):
        script_cli.output_path(tmp_path / "a-file", "--out-dir", folder=True)


def test_run_gives_each_failure_its_exit_status_and_one_line(capsys: pytest.CaptureFixture,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PPBENCH_TRACEBACK", raising=False)

    def failing(error: BaseException):
        def main(argv):
            raise error
        return main

    for error, status in [(InputError("bad\nvalue"), 2), (MachineError("no disk"), 3),
                          (PermissionError(13, "Permission denied", "/x"), 3),
                          (KeyboardInterrupt(), 130)]:
        assert script_cli.run("tool", failing(error)) == status
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("tool: "), err
    assert script_cli.run("tool", lambda argv: None) == 0
    # A bug is not the input's fault: its traceback stays.
    with pytest.raises(ZeroDivisionError):
        script_cli.run("tool", failing(ZeroDivisionError()))


@pytest.mark.parametrize("signum", [15, 1])  # SIGTERM (`timeout`), SIGHUP
def test_a_stop_signal_runs_the_script_s_finally_blocks(tmp_path: Path, signum: int):
    # Python's default for SIGTERM ends the process without its finally blocks: a link
    # benchmark stopped by `timeout` left its emulated nodes' namespaces behind.
    program = tmp_path / "tool.py"
    program.write_text(
        "import pathlib, sys, time\n"
        f"sys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
        "import script_cli\n"
        "def main(argv):\n"
        "    try:\n"
        "        print('started', flush=True)\n"
        "        time.sleep(60)\n"
        "    finally:\n"
        f"        pathlib.Path({str(tmp_path / 'cleaned')!r}).write_text('yes')\n"
        "sys.exit(script_cli.run('tool', main))\n")
    child = subprocess.Popen([sys.executable, str(program)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "started\n"
    child.send_signal(signum)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 128 + signum, err
    assert (tmp_path / "cleaned").read_text() == "yes"
    assert err.splitlines() == [f"tool: stopped by SIG{'TERM' if signum == 15 else 'HUP'}"]


def test_require_module_is_a_machine_error():
    with pytest.raises(MachineError, match="needs the Python module 'no_such_module_here'"):
        script_cli.require_module("no_such_module_here", "the comparison")
    assert script_cli.require_module("json", "x").dumps([]) == "[]"


# --- the reference-table scripts (results_io.table_script_main) -----------------------------

@pytest.mark.parametrize("script", ["scripts/zb_table5.py", "scripts/dp_scaling.py"])
def test_a_table_script_checks_ppbench_and_out_before_it_runs(script: str, tmp_path: Path,
                                                              fake_ppbench: tuple[str, Path]):
    ppbench, calls = fake_ppbench
    cases = [
        (["--ppbench", str(tmp_path / "none"), "--out", str(tmp_path / "t.json")], 2,
         "is not a program"),
        (["--ppbench", ppbench, "--out", "/proc/no-such/t.json"], 2, "cannot write there"),
        (["--ppbench", ppbench, "--out", str(tmp_path)], 2, "is a folder"),
        (["--ppbench", "/bin/true", "--out", str(tmp_path / "t.json")], 1,
         "printed no JSON record"),
    ]
    for args, status, words in cases:
        done = run_script(script, *args)
        assert done.returncode == status, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and words in done.stderr, (args, done.stderr)
    # The unwritable --out was refused before ppbench was asked anything.
    assert not calls.exists() or calls.read_text() == ""
    assert not (tmp_path / "t.json").exists()


def test_an_unknown_option_is_named_before_a_missing_argument(capsys: pytest.CaptureFixture):
    parser = script_cli.OneLineParser(prog="tool")
    parser.add_argument("results")
    parser.add_argument("--out")
    for words, named in [(["--typo"], "unrecognized arguments: --typo"),
                         (["--ou=x", "--typo=1", "-z"], "unrecognized arguments: --typo=1 -z"),
                         (["--out", "x"], "the following arguments are required: results"),
                         (["--", "r", "s"], "unrecognized arguments: s")]:
        with pytest.raises(SystemExit) as e:
            parser.parse_args(words)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.splitlines() == [f"tool: {named} (see --help)"], err
    # After `--`, or as a negative number, a word that starts with "-" is a value.
    assert parser.parse_args(["--out", "-", "--", "--not-an-option"]).results == "--not-an-option"
    assert parser.parse_args(["-1"]).results == "-1"


# --- figures (results_io) ----------------------------------------------------------------

def test_a_figure_is_written_whole_or_not_at_all(tmp_path: Path):
    import matplotlib.pyplot as plt
    from results_io import atomic_savefig, figure_path

    out = tmp_path / "fig.png"
    out.write_bytes(b"the old figure")
    fig, _ = plt.subplots()
    # A draw that fails half-way leaves the old file and no temp file behind.
    with pytest.raises(ValueError):
        atomic_savefig(fig, out, dpi=-1)
    assert out.read_bytes() == b"the old figure"
    assert [p.name for p in tmp_path.iterdir()] == ["fig.png"]
    atomic_savefig(fig, out, dpi=50)
    assert out.read_bytes().startswith(b"\x89PNG")
    # A name without a suffix gets ".png", as savefig's own; an unknown suffix is bad input.
    assert figure_path(tmp_path / "timeline") == tmp_path / "timeline.png"
    assert figure_path(tmp_path / "t.svg") == tmp_path / "t.svg"
    with pytest.raises(InputError, match=r"--plot .*t\.xyz: matplotlib cannot write a \.xyz"):
        figure_path(tmp_path / "t.xyz", "--plot")
    plt.close(fig)


# --- a Python without matplotlib -------------------------------------------------------------

FIGURE_SCRIPTS = ["plot_bubble", "plot_memory", "plot_memory_step", "plot_timeline",
                  "gpipe_tables"]


def without_matplotlib(tmp_path: Path) -> dict:
    """An environment in which `import matplotlib` fails, as in a python3 without it."""
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'matplotlib'\")\n")
    env = dict(os.environ, PYTHONPATH=str(shadow.parent))
    env.pop("PPBENCH_TRACEBACK", None)
    return env


@pytest.mark.parametrize("script", FIGURE_SCRIPTS)
def test_help_needs_no_matplotlib(script: str, tmp_path: Path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), "--help"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=without_matplotlib(tmp_path))
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


@pytest.mark.parametrize("script", FIGURE_SCRIPTS)
def test_a_figure_without_matplotlib_is_one_line_and_exit_3(script: str, tmp_path: Path):
    from conftest import result_row, run_row, write_jsonl
    theory = write_jsonl(tmp_path / "t.jsonl", [result_row("gpipe", 2, n, 0.2, 0.2)
                                                for n in (1, 2, 4)])
    cpu = write_jsonl(tmp_path / "cpu.jsonl", [run_row("1f1b", 2, 4, 0.3, 0.25)])
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"name": "F0.0", "cat": "F", "ph": "X", "pid": 0, "tid": 0, "ts": 0, "dur": 1000,
         "args": {"stage": 0, "mb": 0}}]}))
    reuse = tmp_path / "reuse.json"
    reuse.write_text(json.dumps({"data": {"profiles": {}, "runs": {}, "scaling_runs": []}}))
    out = tmp_path / "out"
    args = {"plot_bubble": [str(theory), "--out-dir", str(out)],
            "plot_memory": [str(cpu), "--out-dir", str(out)],
            "plot_memory_step": ["--ppbench", str(tmp_path / "ppbench"), "--out-dir", str(out)],
            "plot_timeline": [str(trace), "--out", str(out / "t.png")],
            "gpipe_tables": ["--reuse", str(reuse), "--out", str(out / "g.json"), "--plot",
                             str(out / "g.png")]}[script]
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), *args],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=without_matplotlib(tmp_path))
    assert done.returncode == 3, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "needs the Python module 'matplotlib'" in done.stderr
    assert not out.exists() or not any(out.iterdir())


# --- ppbench records of another shape, and the folder a table script runs from --------------

def printing_ppbench(tmp_path: Path, record: str, dp_record: str | None = None) -> str:
    """A ppbench that prints `record` for every command (`dp_record`, where given, for one with
    --dp), after checking that a device profile it is given exists (as ppbench does)."""
    program = tmp_path / "ppbench"
    program.write_text(f"""#!{sys.executable}
import os, sys
args = sys.argv[1:]
if "--device-profile" in args and not os.path.isfile(args[args.index("--device-profile") + 1]):
    sys.exit("ppbench: error: --device-profile: no such file")
print({dp_record!r} if {dp_record is not None!r} and "--dp" in args else {record!r})
""")
    program.chmod(0o755)
    return str(program)


DP_RECORD = ('{"makespan": 2.0, "bubble_fraction": 0.18, "workload": {"microbatch_size": 1, '
             '"config": {"seq": 8192}}, "partition": {"layer_counts": [4, 4]}}')
# What `ppbench simulate -s 1f1b -d 8 -n 32 --workload transformer --preset llama3-8b --dtype
# bf16 -b 1 --device-profile ... --dp 2 --dp-bandwidth 50 --dp-latency 10 --format json` prints
# (the fields dp_scaling.py reads): data_parallel.stage_volume is a list, one entry per stage.
DP2_VOLUMES = [1050673152.0, 1744896000.0, 2181120000.0, 2181120000.0, 2181120000.0,
               2181120000.0, 2181120000.0, 2359353344.0]
DP2_RECORD = json.dumps({
    "makespan": 2.7194974726273484, "bubble_fraction": 0.29249659406150974,
    "allreduce_bytes": 2359353344.0, "allreduce_time": 0.04720706687999998,
    "exposed_allreduce": 0.04720706687999998,
    "workload": {"microbatch_size": 1, "config": {"seq": 8192}},
    "partition": {"layer_counts": [1, 4, 5, 5, 5, 5, 5, 4], "method": "balanced"},
    "data_parallel": {
        "algorithm": "ring: 2 (R-1) latency + 2 (R-1)/R x volume / bandwidth",
        "allreduce": "end_of_step", "link_bandwidth": 50000000000.0, "link_latency": 1e-05,
        "microbatches_per_step": 64.0, "pipeline_ranks": 8, "processes": 16, "replicas": 2,
        "stage_volume": DP2_VOLUMES, "throughput": 23.53375969059777, "volume_unit": "bytes"}})


def test_dp_scaling_reads_the_per_stage_gradient_volumes_of_two_replicas(tmp_path: Path):
    # data_parallel.stage_volume was read as one number: the R = 2 cases exited 1.
    done = run_script("scripts/dp_scaling.py", "--ppbench",
                      printing_ppbench(tmp_path, DP_RECORD, DP2_RECORD),
                      "--out", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert [r["gradient_bytes_per_stage"] for r in rows] == [None, DP2_VOLUMES, DP2_VOLUMES]
    assert rows[1]["allreduce_time"] == 0.04720706687999998


@pytest.mark.parametrize("volume, words", [
    ("[1.0, null]", "data_parallel.stage_volume[1] is None, not a finite number"),
    ('"many"', "data_parallel.stage_volume is 'many', not a JSON array"),
    ("[1.0, NaN]", "data_parallel.stage_volume[1] is nan, not a finite number"),
])
def test_dp_scaling_names_a_gradient_volume_of_another_shape(volume: str, words: str,
                                                             tmp_path: Path):
    record = DP2_RECORD.replace(json.dumps(DP2_VOLUMES), volume)
    assert record != DP2_RECORD
    done = run_script("scripts/dp_scaling.py", "--ppbench",
                      printing_ppbench(tmp_path, DP_RECORD, record),
                      "--out", str(tmp_path / "t.json"))
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("script, record, words", [
    ("zb_table5", "[1]", "printed a record whose top level is array, not an object"),
    ("zb_table5", '{"makespan": 1.0}', "printed a record without zb_bubble_rate"),
    ("zb_table5", '{"zb_bubble_rate": null, "makespan": 1.0}',
     "printed a record whose zb_bubble_rate is None, not a finite number"),
    ("zb_table5", '{"zb_bubble_rate": NaN, "makespan": 1.0}',
     "printed a record whose zb_bubble_rate is nan, not a finite number"),
    ("dp_scaling", DP_RECORD.replace('{"microbatch_size": 1, "config": {"seq": 8192}}', "null"),
     "printed a record whose workload is null, not an object"),
    ("dp_scaling", DP_RECORD.replace('"layer_counts": [4, 4]', '"layer_counts": 8'),
     "printed a record whose partition.layer_counts is 8, not a JSON array"),
    ("dp_scaling", DP_RECORD.replace('"makespan": 2.0', '"makespan": 0'),
     "printed makespan 0, not a positive number"),
])
def test_a_table_script_names_a_ppbench_record_of_another_shape(
        script: str, record: str, words: str, tmp_path: Path):
    done = run_script(f"scripts/{script}.py", "--ppbench", printing_ppbench(tmp_path, record),
                      "--out", str(tmp_path / "t.json"))
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "t.json").exists()


def test_dp_scaling_runs_from_any_folder(tmp_path: Path):
    # It read its device profile relative to the folder it was run from.
    env = dict(os.environ)
    env.pop("PPBENCH_TRACEBACK", None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "dp_scaling.py"), "--ppbench",
                           printing_ppbench(tmp_path, DP_RECORD), "--out", "t.json"],
                          capture_output=True, text=True, timeout=60, cwd=elsewhere, env=env)
    assert done.returncode == 0, done.stderr
    table = json.loads((elsewhere / "t.json").read_text())
    assert table["assumptions"]["device_profile"] == "results/reference/h100_sxm_profile.json"
    assert table["assumptions"]["device_rates"]["peak_flops"] > 0
    # the command is recorded as run from the repository
    assert "--device-profile results/reference/h100_sxm_profile.json" in table["rows"][0]["command"]


def test_gpu_tables_appends_strict_json_lines(tmp_path: Path):
    # A record with NaN went into the JSON Lines file as it came (plain json.dumps, no lock).

    from results_io import loads_finite
    out = tmp_path / "gt"

    def tables(record: str) -> int:
        return run_script("scripts/gpu_tables.py", "--out-dir", str(out), "--filter",
                          "^1f1b/.*/D1/", "--", printing_ppbench(tmp_path, record)).returncode

    assert tables('{"throughput": {"samples_per_s": NaN}}') == 1
    lines = (out / "gpu_tables.jsonl").read_text().splitlines()
    assert len(lines) == 1
    row = loads_finite(lines[0])
    assert row["gpu_table"]["status"] == "error" and "not a run record" in row["gpu_table"]["error"]
    assert tables(json.dumps({"throughput": {"samples_per_s": 5.0}})) == 0
    lines = (out / "gpu_tables.jsonl").read_text().splitlines()
    assert [loads_finite(x)["gpu_table"]["status"] for x in lines] == ["error", "ok"]
