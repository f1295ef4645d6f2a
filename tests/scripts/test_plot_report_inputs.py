"""The report and plot scripts name a bad input in one line (exit 2) instead of drawing or
printing it: non-finite numbers in the reproduction tables, a figure path that is a folder, a
--title matplotlib cannot draw, impossible records, a --ppbench that names no program; and the
GPU report links the memory figure its own run drew."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import report
from conftest import ROOT, SCRIPTS, result_row, write_jsonl

REFERENCE = ROOT / "results" / "reference"


def run_script(script: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPLBACKEND="Agg")
    env.pop("PPBENCH_TRACEBACK", None)
    return subprocess.run([sys.executable, str(SCRIPTS / script), *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env, check=False)


def one_line(done: subprocess.CompletedProcess, code: int, *words: str) -> str:
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def theory(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "t.jsonl", [result_row("1f1b", 4, n, 0.2, 0.2)
                                              for n in (4, 8)])


# --- 2. the reproduction tables are read as strict JSON ---------------------------------------

@pytest.mark.parametrize("option, name", [
    ("--zb-table5", "zb_table5.json"), ("--dp-scaling", "dp_scaling.json"),
    ("--gpipe-tables", "gpipe_tables.json"), ("--dualpipe-measured", "dualpipe_measured.json")])
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_table_with_a_non_finite_number_is_refused(option: str, name: str, constant: str,
                                                     tmp_path: Path):
    # read_table allowed NaN: the report printed "nan" in the table, exit 0.
    text = (REFERENCE / name).read_text()
    table = tmp_path / name
    table.write_text(text.replace("{", '{"extra": ' + constant + ", ", 1))
    out = tmp_path / "R.md"
    done = run_script("report.py", str(theory(tmp_path)), "--out", str(out), option, str(table))
    one_line(done, 2, option, str(table), constant if constant != "-Infinity" else "Infinity")
    assert not out.exists()


def test_a_nan_inside_the_dp_table_never_reaches_the_report(tmp_path: Path):
    table = json.loads((REFERENCE / "dp_scaling.json").read_text())
    table["rows"][0]["makespan"] = float("nan")
    path = tmp_path / "dp.json"
    path.write_text(json.dumps(table))
    done = run_script("report.py", str(theory(tmp_path)), "--out", str(tmp_path / "R.md"),
                      "--dp-scaling", str(path))
    one_line(done, 2, "--dp-scaling", "NaN")


def test_the_reference_tables_still_read(tmp_path: Path):
    out = tmp_path / "R.md"
    done = run_script("report.py", str(theory(tmp_path)), "--out", str(out),
                      *[a for option, name in [("--zb-table5", "zb_table5.json"),
                                               ("--dp-scaling", "dp_scaling.json"),
                                               ("--gpipe-tables", "gpipe_tables.json"),
                                               ("--dualpipe-measured", "dualpipe_measured.json")]
                        for a in (option, str(REFERENCE / name))])
    assert done.returncode == 0, done.stderr
    assert " nan " not in out.read_text() and "| nan" not in out.read_text()


# --- 3. a figure path that is a folder -------------------------------------------------------

def test_gpipe_tables_refuses_a_plot_that_is_a_folder(tmp_path: Path):
    folder = tmp_path / "figs"
    folder.mkdir()
    done = run_script("gpipe_tables.py", "--reuse", str(REFERENCE / "gpipe_tables.json"),
                      "--out", str(tmp_path / "g.json"), "--plot", str(folder),
                      "--gpu-rows", str(tmp_path / "none" / "*.jsonl"), "--ppbench",
                      str(tmp_path / "absent"))
    one_line(done, 2, "--plot", str(folder), "folder")
    assert not (tmp_path / "figs.png").exists() and not (tmp_path / "g.json").exists()


# --- 4. gpu_tables: a record without a positive throughput -----------------------------------

@pytest.mark.parametrize("sps", ["null", "0", "-3.5", "true", '"fast"'])
def test_gpu_tables_names_a_record_without_a_positive_throughput(sps: str, tmp_path: Path):
    # A null samples_per_s passed as an ok row, and the table's format raised a TypeError.
    program = tmp_path / "ppbench"
    program.write_text(f"#!{sys.executable}\nprint('{{\"throughput\": "
                       f"{{\"samples_per_s\": {sps}}}}}')\n")
    program.chmod(0o755)
    out = tmp_path / "gt"
    done = run_script("gpu_tables.py", "--out-dir", str(out), "--filter", "^1f1b/.*/D1/", "--",
                      str(program))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    rows = [json.loads(x) for x in (out / "gpu_tables.jsonl").read_text().splitlines()]
    assert [r["gpu_table"]["status"] for r in rows] == ["error"]
    assert "samples_per_s" in rows[0]["gpu_table"]["error"]
    assert "not a positive number" in rows[0]["gpu_table"]["error"]
    assert "ERROR" in (out / "gpu_tables.txt").read_text()


# --- 5. plot_timeline: a bad --title or --label, non-finite or negative times ----------------

def trace(events: list[dict] | None = None) -> dict:
    def ev(name, rank, ts, dur):
        return {"name": name, "cat": name[0], "ph": "X", "pid": 0, "tid": rank, "ts": ts,
                "dur": dur, "args": {"stage": rank, "mb": 0}}
    return {"traceEvents": events if events is not None else
            [ev("F0.0", 0, 0, 1000), ev("F1.0", 1, 1000, 1000), ev("B1.0", 1, 2000, 2000),
             ev("B0.0", 0, 4000, 2000)],
            "otherData": {"schedule": "t", "devices": 2, "microbatches": 1}}


def write_trace(tmp_path: Path, value: dict | str) -> Path:
    path = tmp_path / "t.json"
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


@pytest.mark.parametrize("option", ["--title", "--label"])
def test_a_title_matplotlib_cannot_draw_is_named_not_the_trace(option: str, tmp_path: Path):
    path = write_trace(tmp_path, trace())
    out = tmp_path / "w.png"
    done = run_script("plot_timeline.py", str(path), "--out", str(out), option, "$x^$")
    line = one_line(done, 2, option, "$x^$")
    assert "trace" not in line.split(":")[1], line
    assert not out.exists()
    # An escaped dollar and well-formed mathtext draw.
    for text in (r"costs \$5", "$x^2$ scaling"):
        done = run_script("plot_timeline.py", str(path), "--out", str(out), option, text)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("field, value", [("ts", "NaN"), ("dur", "Infinity"),
                                          ("ts", "-Infinity"), ("dur", "1e999")])
def test_a_non_finite_time_names_the_field_and_the_event(field: str, value: str, tmp_path: Path):
    # The first event with ts 1000 is F1.0 (traceEvents[1]); with dur 1000, F0.0 ([0]).
    text = json.dumps(trace()).replace(f'"{field}": 1000', f'"{field}": {value}', 1)
    done = run_script("plot_timeline.py", str(write_trace(tmp_path, text)), "--out",
                      str(tmp_path / "w.png"))
    event = "traceEvents[1]" if field == "ts" else "traceEvents[0]"
    one_line(done, 2, f"{event}.{field}", "finite")
    assert not (tmp_path / "w.png").exists()


def test_a_negative_duration_is_refused(tmp_path: Path):
    t = trace()
    t["traceEvents"][2]["dur"] = -5
    done = run_script("plot_timeline.py", str(write_trace(tmp_path, t)), "--out",
                      str(tmp_path / "w.png"))
    one_line(done, 2, "traceEvents[2].dur", "-5", ">= 0")


def test_compute_events_that_all_last_zero_are_no_division_by_zero(tmp_path: Path):
    t = trace()
    for e in t["traceEvents"]:
        e["ts"], e["dur"] = 0, 0
    done = run_script("plot_timeline.py", str(write_trace(tmp_path, t)), "--out",
                      str(tmp_path / "w.png"))
    line = one_line(done, 2, "trace")
    assert "ZeroDivision" not in line and "no time" in line, line
    # Zero-length events at different times still span time: drawn.
    for i, e in enumerate(t["traceEvents"]):
        e["ts"] = 1000 * i
    done = run_script("plot_timeline.py", str(write_trace(tmp_path, t)), "--out",
                      str(tmp_path / "w.png"))
    assert done.returncode == 0, done.stderr


# --- 6. report options, impossible records, --ppbench, kept_runs -----------------------------

def test_report_refuses_a_figures_folder_that_is_not_there(tmp_path: Path):
    out = tmp_path / "R.md"
    done = run_script("report.py", str(theory(tmp_path)), "--out", str(out), "--figures",
                      str(tmp_path / "nonexistent"))
    one_line(done, 2, "--figures", "nonexistent")
    assert not out.exists()
    done = run_script("report.py", str(theory(tmp_path)), "--out", str(out), "--figures",
                      str(tmp_path / "t.jsonl"))
    one_line(done, 2, "--figures", "not a folder")


def test_report_refuses_html_and_out_of_the_same_file(tmp_path: Path):
    out = tmp_path / "R.md"
    done = run_script("report.py", str(theory(tmp_path)), "--out", str(out), "--html",
                      str(tmp_path / "." / "R.md"))
    one_line(done, 2, "--html", "--out", "same file")
    assert not out.exists()


@pytest.mark.parametrize("key, value", [("microbatches", 0), ("devices", 0),
                                        ("devices", -2), ("microbatches", -1)])
@pytest.mark.parametrize("script", ["report.py", "plot_bubble.py"])
def test_a_record_with_no_devices_or_micro_batches_is_refused(script: str, key: str, value: int,
                                                              tmp_path: Path):
    rows = [result_row("1f1b", 4, n, 0.2, 0.2) for n in (4, 8)]
    rows[1][key] = value
    rows[1]["point"][key] = value
    results = write_jsonl(tmp_path / "t.jsonl", rows)
    out = ["--out", str(tmp_path / "R.md")] if script == "report.py" else \
        ["--out-dir", str(tmp_path / "figs")]
    done = run_script(script, str(results), *out)
    one_line(done, 2, key, str(value), ">= 1")
    assert not (tmp_path / "R.md").exists() and not (tmp_path / "figs").exists()


@pytest.mark.parametrize("script, args", [
    ("plot_bubble.py", ["T", "--out-dir", "OUT"]),
    ("plot_memory_step.py", ["--out-dir", "OUT"]),
    ("report.py", ["T", "--out", "OUT/R.md"]),
    ("plot_memory.py", ["T", "--out-dir", "OUT"]),
])
@pytest.mark.parametrize("ppbench", ["folder", "absent"])
def test_a_ppbench_that_names_no_program_is_exit_2_in_every_script(
        script: str, args: list[str], ppbench: str, tmp_path: Path):
    # plot_bubble said exit 3 for a folder, plot_memory_step exit 2 ("not a program").
    (tmp_path / "folder").mkdir()
    t = theory(tmp_path)
    args = [str(t) if a == "T" else a.replace("OUT", str(tmp_path / "out")) for a in args]
    done = run_script(script, *args, "--ppbench", str(tmp_path / ppbench))
    one_line(done, 2, str(tmp_path / ppbench))
    assert not (tmp_path / "out").exists()


def test_a_ppbench_that_cannot_run_is_exit_3_and_makes_no_folder(tmp_path: Path):
    # plot_bubble made --out-dir before it asked ppbench for its registry.
    t = theory(tmp_path)
    for program in ("/bin/false", str(t)):  # fails; is not executable
        done = run_script("plot_bubble.py", str(t), "--out-dir", str(tmp_path / "newdir"),
                          "--ppbench", program)
        assert done.returncode in (1, 3), done.stderr
        assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
        assert not (tmp_path / "newdir").exists()
    done = run_script("plot_bubble.py", str(t), "--out-dir", str(tmp_path / "newdir"),
                      "--ppbench", str(t))
    assert done.returncode == 3, done.stderr


def test_kept_runs_prints_a_dash_for_an_op_that_took_no_time_alone(tmp_path: Path):
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "scaling-1f1b-D2-N8.profile.json").write_text(json.dumps(
        {"stages": [{"F": 0.001, "B": 0.002}, {"F": 0.001, "B": 0.002}]}))
    (kept / "scaling-one-partition-of-D2-1f1b-D1-N8.profile.json").write_text(json.dumps(
        {"stages": [{"F": 0.0, "B": 0.002}]}))
    done = run_script("kept_runs.py", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "nan" not in done.stdout.lower()
    f_row = next(line for line in done.stdout.splitlines() if line.startswith("| 2 | 8 | F "))
    assert f_row.rstrip().endswith("| — |"), f_row


@pytest.mark.parametrize("alone", ["NaN", "-0.5", "Infinity"])
def test_kept_runs_refuses_a_time_that_is_no_time(alone: str, tmp_path: Path):
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "scaling-1f1b-D2-N8.profile.json").write_text(json.dumps(
        {"stages": [{"F": 0.001}, {"F": 0.001}]}))
    (kept / "scaling-one-partition-of-D2-1f1b-D1-N8.profile.json").write_text(
        '{"stages": [{"F": ' + alone + '}]}')
    done = run_script("kept_runs.py", str(tmp_path))
    one_line(done, 2, "F", "scaling-one-partition-of-D2-1f1b-D1-N8.profile.json")


# --- 7. the GPU report links the memory figure its run drew ----------------------------------

def test_the_memory_figure_is_the_one_the_first_folder_holds_with_its_own_d_and_n(
        tmp_path: Path):
    gpu, reference = tmp_path / "plots" / "gpu", tmp_path / "plots" / "reference"
    gpu.mkdir(parents=True)
    reference.mkdir(parents=True)
    (gpu / "memory_transformer_D4_N32.png").write_bytes(b"\x89PNG gpu")
    (reference / "memory_transformer_D4_N8.png").write_bytes(b"\x89PNG cpu")
    figures = report.Figures([gpu, reference], tmp_path / "results")
    text = report.build_report([result_row("1f1b", 4, 8, 0.2, 0.2)], "t.jsonl",
                               figures=figures)
    assert "memory_transformer_D4_N32.png" in text
    assert "memory_transformer_D4_N8.png" not in text
    caption = next(line for line in text.splitlines()
                   if line.startswith("![") and "D4_N32" in line)
    assert "D = 4, N = 32" in caption and "N = 8" not in caption
    # Without the GPU folder the CPU figure, captioned as drawn.
    text = report.build_report([result_row("1f1b", 4, 8, 0.2, 0.2)], "t.jsonl",
                               figures=report.Figures([reference], tmp_path / "results"))
    caption = next(line for line in text.splitlines()
                   if line.startswith("![") and "D4_N8" in line)
    assert "D = 4, N = 8" in caption
