"""The report and plot scripts keep the command-line contract (scripts/script_cli.py) on bad input:
one line on stderr that names the bad value, exit 2, no traceback, no hang and no output left
behind. Each case runs the script's main through script_cli.run, as its entry point does; the
cases that could hang or that check the entry point itself run it as a process."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from conftest import ROOT, result_row, run_row, write_jsonl
from script_cli import run

UNWRITABLE = "/proc/no-such-folder"  # a parent that cannot be made, even as root


def trace(events: list | None = None, other: object = None) -> dict:
    """A two-rank simulated trace: F then B on each rank."""
    events = events if events is not None else [
        {"name": f"{op}{r}.0", "cat": op, "ph": "X", "pid": 0, "tid": r, "ts": t * 1000,
         "dur": 1000, "args": {"stage": r, "mb": 0}}
        for r in range(2) for op, t in (("F", r), ("B", 3 - r))]
    return {"traceEvents": events, "otherData": other if other is not None else
            {"schedule": "test", "devices": 2, "microbatches": 1, "time_unit": "unit"}}


def changed(row: dict, **fields) -> dict:
    """`row` with `fields` set (None: removed), at its top level and in its point."""
    row = json.loads(json.dumps(row))
    for key, value in fields.items():
        for record in (row, row.get("point") if isinstance(row.get("point"), dict) else {}):
            if value is None:
                record.pop(key, None)
            elif key in record or record is row:
                record[key] = value
    return row


class Inputs:
    """The files the cases name, made under tmp_path: good ones and one of each bad kind."""

    def __init__(self, root: Path):
        self.root = root
        self.theory = write_jsonl(root / "theory.jsonl", [
            result_row("gpipe", 2, n, 1 / (1 + n), 1 / (1 + n)) for n in (1, 2, 4)])
        self.cpu = write_jsonl(root / "cpu.jsonl", [run_row("1f1b", 2, 4, 0.3, 0.25)])
        self.missing = root / "missing.json"
        self.folder = root / "a-folder"
        self.folder.mkdir()
        self.a_file = root / "a-file"
        self.a_file.write_text("x")
        self.latin = root / "latin.json"
        self.latin.write_bytes(b'\xff\xfe{"a": 1}\n')
        self.bad_json = root / "bad.json"
        self.bad_json.write_text("{oops")
        self.empty = root / "empty.jsonl"
        self.empty.write_text("")
        self.array = root / "array.json"
        self.array.write_text("[1]")
        self.object = root / "object.json"
        self.object.write_text('{"a": 1}')
        self.trace = self.json("trace.json", trace())
        self.out = root / "out"

    def json(self, name: str, value: object) -> Path:
        path = self.root / name
        path.write_text(json.dumps(value))
        return path

    def theory_with(self, name: str, **fields) -> Path:
        return write_jsonl(self.root / name, [changed(result_row("gpipe", 2, 4, 0.2, 0.2),
                                                      **fields)])

    def cpu_with(self, name: str, **fields) -> Path:
        return write_jsonl(self.root / name, [changed(run_row("1f1b", 2, 4, 0.3, 0.25),
                                                      **fields)])


# (case id, script, argv from the inputs, exit status, key phrase of the message, outputs that
# must not exist afterwards, relative to the inputs' folder)
Case = tuple[str, str, Callable[[Inputs], list[str]], int, str, tuple[str, ...]]

CASES: list[Case] = [
    # plot_bubble.py
    ("bubble-missing", "plot_bubble", lambda i: [str(i.missing)], 2, "no such file", ()),
    ("bubble-folder", "plot_bubble", lambda i: [str(i.folder)], 2, "is a folder", ()),
    ("bubble-not-utf8", "plot_bubble", lambda i: [str(i.latin)], 2, "not UTF-8", ()),
    ("bubble-empty", "plot_bubble", lambda i: [str(i.empty), "--out-dir", str(i.out)], 2,
     "no ok rows", ("out",)),
    ("bubble-devices-option", "plot_bubble", lambda i: [str(i.theory), "--devices", "abc"], 2,
     "--devices: 'abc' is not a whole number", ()),
    ("bubble-devices-field", "plot_bubble", lambda i: [str(i.theory_with("d.jsonl",
                                                                         devices="abc"))],
     2, "devices 'abc'", ()),
    ("bubble-chunks-field", "plot_bubble", lambda i: [str(i.theory_with("c.jsonl", chunks="x"))],
     2, "chunks 'x'", ()),
    ("bubble-fraction-string", "plot_bubble",
     lambda i: [str(i.theory_with("b.jsonl", bubble_fraction="0.5"))], 2,
     "bubble_fraction '0.5'", ()),
    ("bubble-no-microbatches", "plot_bubble",
     lambda i: [str(i.theory_with("n.jsonl", microbatches=None))], 2, "has no microbatches", ()),
    ("bubble-point-list", "plot_bubble", lambda i: [str(i.theory_with("p.jsonl", point=[1]))],
     2, "point [1]", ()),
    ("bubble-dpi-0", "plot_bubble", lambda i: [str(i.theory), "--dpi", "0"], 2,
     "--dpi: 0 is out of range", ()),
    ("bubble-dpi-negative", "plot_bubble", lambda i: [str(i.theory), "--dpi", "-1"], 2,
     "--dpi: -1 is out of range", ()),
    ("bubble-dpi-huge", "plot_bubble", lambda i: [str(i.theory), "--dpi", "100000"], 2,
     "--dpi: 100000 is out of range", ()),
    ("bubble-out-dir", "plot_bubble", lambda i: [str(i.theory), "--out-dir", UNWRITABLE + "/pb"],
     2, "cannot write there", ()),
    # plot_memory.py
    ("memory-missing", "plot_memory", lambda i: [str(i.missing)], 2, "no such file", ()),
    ("memory-not-utf8", "plot_memory", lambda i: [str(i.latin)], 2, "not UTF-8", ()),
    ("memory-activation-bytes", "plot_memory",
     lambda i: [str(i.cpu_with("a.jsonl", activation_bytes=5)), "--out-dir", str(i.out)], 2,
     "activation_bytes 5", ("out",)),
    ("memory-point-string", "plot_memory", lambda i: [str(i.cpu_with("p.jsonl", point="str"))],
     2, "point 'str'", ()),
    ("memory-dpi-0", "plot_memory", lambda i: [str(i.cpu), "--dpi", "0"], 2,
     "--dpi: 0 is out of range", ()),
    ("memory-devices-negative", "plot_memory", lambda i: [str(i.cpu), "--devices", "-1"], 2,
     "--devices: -1 is out of range", ()),
    ("memory-out-dir", "plot_memory", lambda i: [str(i.cpu), "--out-dir", UNWRITABLE + "/pm"],
     2, "cannot write there", ()),
    # plot_memory_step.py (refused before ppbench runs: the ppbench named is a file, but not a
    # program, which would fail if it ran; one that names no file is refused before --out-dir)
    ("memory-step-out-dir", "plot_memory_step",
     lambda i: ["--ppbench", str(i.a_file), "--out-dir", UNWRITABLE + "/pms"], 2,
     "cannot write there", ()),
    ("memory-step-out-dir-file", "plot_memory_step",
     lambda i: ["--ppbench", str(i.a_file), "--out-dir", str(i.a_file)], 2,
     "exists and is not a folder", ()),
    ("memory-step-no-ppbench", "plot_memory_step",
     lambda i: ["--ppbench", str(i.missing), "--out-dir", str(i.out)], 2, "is not a program",
     ("out/memory_8b_pp_seq.png",)),
    # plot_timeline.py
    ("timeline-missing", "plot_timeline", lambda i: [str(i.missing)], 2, "no such file", ()),
    ("timeline-folder", "plot_timeline", lambda i: [str(i.folder)], 2, "is a folder", ()),
    ("timeline-bad-json", "plot_timeline", lambda i: [str(i.bad_json)], 2, "bad.json: not JSON",
     ()),
    ("timeline-not-utf8", "plot_timeline", lambda i: [str(i.latin)], 2, "not UTF-8", ()),
    ("timeline-event-not-object", "plot_timeline",
     lambda i: [str(i.json("t.json", trace(events=[5]))), "--out", str(i.out / "t.png")], 2,
     "traceEvents[0] is number, not an object", ("out/t.png",)),
    ("timeline-args-list", "plot_timeline",
     lambda i: [str(i.json("t.json", trace(events=[{"ph": "X", "tid": 0, "ts": 0, "dur": 1,
                                                    "args": [1]}])))], 2,
     "traceEvents[0].args is array", ()),
    ("timeline-other-data-list", "plot_timeline",
     lambda i: [str(i.json("t.json", trace(other=[1])))], 2, "otherData is array", ()),
    ("timeline-no-compute-events", "plot_timeline",
     lambda i: [str(i.json("t.json", trace(events=[]))), "--out", str(i.out / "t.png")], 2,
     "no compute events", ("out/t.png",)),
    ("timeline-width-huge", "plot_timeline", lambda i: [str(i.trace), "--width", "1e12"], 2,
     "--width: 1e12 is out of range", ()),
    ("timeline-out-folder", "plot_timeline", lambda i: [str(i.trace), "--out", str(i.folder)],
     2, "is a folder", ("a-folder.png",)),
    ("timeline-out-unwritable", "plot_timeline",
     lambda i: [str(i.trace), "--out", UNWRITABLE + "/t.png"], 2, "cannot write there", ()),
    ("timeline-too-many-pixels", "plot_timeline",
     lambda i: [str(i.json("t.json", trace(events=[{"ph": "X", "pid": 0, "tid": 1023, "ts": 0,
                                                    "dur": 1000, "cat": "F"}]))),
                "--dpi", "1200", "--out", str(i.out / "t.png")], 2, "lower --dpi or --width",
     ("out/t.png",)),
    # report.py
    ("report-missing", "report", lambda i: [str(i.missing)], 2, "no such file", ()),
    ("report-folder", "report", lambda i: [str(i.folder)], 2, "is a folder", ()),
    ("report-not-utf8", "report", lambda i: [str(i.latin)], 2, "not UTF-8", ()),
    ("report-empty", "report", lambda i: [str(i.empty), "--out", str(i.out / "R.md")], 2,
     "no rows", ("out/R.md",)),
    ("report-dualpipe-n-word", "report", lambda i: [str(i.theory), "--dualpipe-n", "abc"], 2,
     "--dualpipe-n: 'abc' is not a whole number", ()),
    ("report-dualpipe-n-zero", "report", lambda i: [str(i.theory), "--dualpipe-n", "0,-1"], 2,
     "--dualpipe-n: 0 is out of range", ()),
    ("report-pp-zero", "report", lambda i: [str(i.theory), "--pp", "0"], 2,
     "--pp: 0 is out of range", ()),
    ("report-pp-negative", "report", lambda i: [str(i.theory), "--pp", "-1"], 2,
     "--pp: -1 is out of range", ()),
    ("report-zb-table5-array", "report", lambda i: [str(i.theory), "--zb-table5", str(i.array)],
     2, "a JSON object was expected, not array", ()),
    ("report-zb-table5-object", "report",
     lambda i: [str(i.theory), "--zb-table5", str(i.object), "--out", str(i.out / "R.md")], 2,
     "no field 'columns'", ("out/R.md",)),
    ("report-zb-table5-bad-json", "report",
     lambda i: [str(i.theory), "--zb-table5", str(i.bad_json)], 2, "bad.json: not JSON", ()),
    ("report-zb-table5-empty", "report", lambda i: [str(i.theory), "--zb-table5", str(i.empty)],
     2, "empty.jsonl: not JSON", ()),
    ("report-dp-scaling-object", "report",
     lambda i: [str(i.theory), "--dp-scaling", str(i.object)], 2,
     "no field 'assumptions'", ()),
    ("report-gpipe-tables-object", "report",
     lambda i: [str(i.theory), "--gpipe-tables", str(i.object)], 2, "not of the shape expected",
     ()),
    ("report-dualpipe-measured-object", "report",
     lambda i: [str(i.theory), "--dualpipe-measured", str(i.object)], 2,
     "not of the shape expected", ()),
    ("report-dualpipe-measured-array", "report",
     lambda i: [str(i.theory), "--dualpipe-measured", str(i.array)], 2,
     "a JSON object was expected", ()),
    ("report-devices-field", "report", lambda i: [str(i.theory_with("d.jsonl", devices="abc"))],
     2, "devices 'abc'", ()),
    ("report-chunks-field", "report", lambda i: [str(i.theory_with("c.jsonl", chunks="x"))], 2,
     "chunks 'x'", ()),
    ("report-measured-activation-bytes", "report",
     lambda i: [str(i.theory), "--measured", str(i.cpu_with("a.jsonl", activation_bytes=5))],
     2, "activation_bytes 5", ()),
    ("report-measured-point-string", "report",
     lambda i: [str(i.theory), "--measured", str(i.cpu_with("p.jsonl", point="str"))], 2,
     "point 'str'", ()),
    ("report-out-unwritable", "report", lambda i: [str(i.theory), "--out", UNWRITABLE + "/R.md"],
     2, "cannot write there", ()),
    ("report-html-unwritable", "report",
     lambda i: [str(i.theory), "--out", str(i.out / "R.md"), "--html", UNWRITABLE + "/R.html"],
     2, "--html", ("out/R.md",)),
    # gpipe_tables.py (refused before ppbench runs: the ppbench named does not exist)
    ("gpipe-reuse-array", "gpipe_tables", lambda i: ["--reuse", str(i.array)], 2,
     "a JSON object was expected, not array", ()),
    ("gpipe-reuse-data-number", "gpipe_tables",
     lambda i: ["--reuse", str(i.json("g.json", {"data": 5}))], 2, "\"data\" is number", ()),
    ("gpipe-reuse-data-empty", "gpipe_tables",
     lambda i: ["--reuse", str(i.json("g.json", {"data": {}}))], 2, "data.profiles is null", ()),
    ("gpipe-reuse-bad-json", "gpipe_tables", lambda i: ["--reuse", str(i.bad_json)], 2,
     "bad.json: not JSON", ()),
    ("gpipe-reuse-missing", "gpipe_tables", lambda i: ["--reuse", str(i.missing)], 2,
     "no such file", ()),
    ("gpipe-out-unwritable", "gpipe_tables",
     lambda i: ["--reuse", str(reusable(i)), "--out", UNWRITABLE + "/g.json"], 2,
     "cannot write there", ()),
    ("gpipe-plot-unwritable", "gpipe_tables",
     lambda i: ["--reuse", str(reusable(i)), "--out", str(i.out / "g.json"), "--plot",
                UNWRITABLE + "/g.png"], 2, "--plot", ("out/g.json",)),
    ("gpipe-gpu-row-shape", "gpipe_tables",
     lambda i: ["--reuse", str(reusable(i)), "--out", str(i.out / "g.json"), "--gpu-rows",
                str(i.json("gpu.jsonl", {"gpu_table": {"status": "ok", "label": 5}}))], 2,
     "gpu_table.label is 5", ("out/g.json",)),
    # dualpipe_measured.py
    ("dualpipe-comparisons-empty", "dualpipe_measured", lambda i: ["--comparisons", ","], 2,
     "names no comparison", ()),
    ("dualpipe-no-ppbench", "dualpipe_measured",
     lambda i: ["--ppbench", str(i.missing), "--out", str(i.out / "d.json")], 2,
     "is not a program", ("out/d.json",)),
]


def reusable(inputs: Inputs) -> Path:
    """A --reuse file of the right outer shape (what is checked before the outputs)."""
    return inputs.json("reuse.json", {"data": {"profiles": {}, "runs": {}, "scaling_runs": []}})


def invoke(script: str, argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """(exit status, stderr) of the script's entry point: run(name, main) and its parser."""
    module = importlib.import_module(script)
    try:
        status = run(script, module.main, argv)
    except SystemExit as e:  # the parser's refusal
        status = int(e.code or 0)
    return status, capsys.readouterr().err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_its_exit_status(case: Case, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PPBENCH_TRACEBACK", raising=False)
    _, script, argv, status, words, absent = case
    inputs = Inputs(tmp_path)
    args = argv(inputs)
    got, err = invoke(script, args, capsys)
    lines = err.splitlines()
    assert got == status, (args, err)
    assert len(lines) == 1, (args, err)
    assert lines[0].startswith(f"{script}: ") and words in lines[0], (args, err)
    assert "Traceback" not in err
    for name in absent:
        assert not (tmp_path / name).exists(), name


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("PPBENCH_TRACEBACK", None)
    return subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), *args],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


# A file named on the command line that is missing, through each script's own entry point.
ENTRY_CASES = [("plot_bubble", []), ("plot_memory", []), ("plot_timeline", []), ("report", []),
               ("gpipe_tables", ["--reuse"]), ("plot_memory_step", ["--ppbench"]),
               ("dualpipe_measured", ["--ppbench"])]


@pytest.mark.parametrize("script, option", ENTRY_CASES, ids=[c[0] for c in ENTRY_CASES])
def test_the_entry_point_names_a_missing_file_in_one_line(script: str, option: list[str],
                                                          tmp_path: Path):
    done = run_script(script, *option, str(tmp_path / "missing"), *(
        ["--out-dir" if script == "plot_memory_step" else "--out", str(tmp_path / "out.x")]
        if option else []))
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"{script}: ") and str(tmp_path / "missing") in done.stderr


def test_a_huge_rank_in_a_trace_is_refused_at_once(tmp_path: Path):
    # It used to draw a row for each of 10^9 ranks: run as a process, with a time limit.
    events = [{"name": "F0.0", "cat": "F", "ph": "X", "pid": 0, "tid": 10**9, "ts": 0,
               "dur": 1000, "args": {"stage": 0, "mb": 0}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace(events=events)))
    done = run_script("plot_timeline", str(path), "--out", str(tmp_path / "t.png"))
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "tid (its rank) is 1000000000" in done.stderr
    assert not (tmp_path / "t.png").exists()


def test_timeline_prints_the_file_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture):
    # matplotlib adds ".png" to a name without a suffix: the script says so.
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace()))
    import plot_timeline
    assert run("plot_timeline", plot_timeline.main, [str(path), "--out",
                                                     str(tmp_path / "figure")]) == 0
    assert (tmp_path / "figure.png").is_file()
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'figure.png'}"


def test_dualpipe_checks_out_before_any_run(tmp_path: Path, fake_ppbench: tuple[str, Path],
                                            capsys: pytest.CaptureFixture):
    ppbench, log = fake_ppbench
    status, err = invoke("dualpipe_measured", ["--ppbench", ppbench, "--out",
                                               UNWRITABLE + "/out.json"], capsys)
    assert status == 2 and len(err.splitlines()) == 1 and "cannot write there" in err, err
    assert not log.exists() or log.read_text() == ""  # ppbench was never asked


def test_gpu_rows_skip_a_broken_line_with_a_warning_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture):
    # As results_io.load_rows does for a line a killed writer left: warned, not fatal.
    import gpipe_tables
    path = tmp_path / "gpu.jsonl"
    path.write_text('[1]\n{"gpu_table": {"status": "error"}}\n{oops\n')
    assert gpipe_tables.gpu_rows(str(path)) == []
    err = capsys.readouterr().err
    assert f"{path}:1: not a JSON object" in err and f"{path}:3: not JSON" in err
