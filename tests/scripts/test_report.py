"""Tests of scripts/report.py and its section modules (scripts/report_*.py) on synthetic sweep
rows."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import report
import report_format
import report_measured
import report_reference
import report_tables
import report_theory
import results_io
from conftest import SCRIPTS, result_row, write_jsonl
from script_cli import run

# report.py and the modules that write its sections.
REPORT_MODULES = (report, report_format, report_measured, report_reference, report_tables,
                  report_theory)


def section(text: str, title: str) -> str:
    """The top-level section whose heading ends with `title` ("## 3. Chimera"), to the next."""
    start = next(i for i, line in enumerate(text.splitlines(keepends=True))
                 if line.startswith("## ") and line.rstrip().endswith(title))
    lines = text.splitlines(keepends=True)[start:]
    end = next((i for i, line in enumerate(lines[1:], 1) if line.startswith("## ")), len(lines))
    return "".join(lines[:end])


def closed(bubble, idle_formula, idle, act_formula, act, params="1x", note=None) -> dict:
    """A record's closed_form as ppbench writes it (the registry's texts and their values)."""
    return {"bubble_formula": "(D-1)/(D-1+N)", "bubble_fraction": bubble,
            "idle_formula": idle_formula, "idle_per_rank": idle,
            "activations_formula": act_formula, "peak_activations": act, "params": params,
            "note": note}


def rows() -> list[dict]:
    out = []
    for d in (2, 4, 8):
        for n in (4, 8, 16):
            bubble = (d - 1) / (d - 1 + n)
            out.append(result_row("1f1b", d, n, bubble, bubble,
                                  closed_form=closed(bubble, "(D-1)(F+B)", 3 * (d - 1),
                                                     "D-r on rank r", d)))
            out.append(result_row("gpipe", d, n, bubble, bubble,
                                  closed_form=closed(bubble, "(D-1)(F+B)", 3 * (d - 1), "N", n)))
    out.append(result_row("naive", 4, 8, 0.75, 0.75,
                          closed_form=closed(0.75, "(D-1)N(F+B)", 72, "1", 1),
                          ranks=[{"rank": 0, "idle": 72, "peak_activations": 1,
                                  "peak_activation_share": 0.25}]))
    out.append(result_row("1f1b", 8, 4, 0, None, status="invalid"))
    for n in (16, 32):
        # zb-h1's idle needs W <= F, I: here it holds; its value comes from the record
        out.append(result_row("zb-h1", 8, n, 0.1, None,
                              closed_form=closed(0.1, "(D-1)(F+I-W) when W <= F, I", 7, "D", 8)))
        out.append(result_row("dualpipe", 8, n, 0.05, None, param_copies=2, peak_activations=9,
                              closed_form=closed(0.05, "(PP/2-1)(F&B+B-3W) on the most idle "
                                                 "rank, PP = D", 6, "PP+1 on every rank", 9,
                                                 "2x")))
        out.append(result_row("dualpipev", 4, n, 0.05, None, param_copies=2, peak_activations=9,
                              closed_form=closed(0.05, "(PP/2-1)(F&B+B-3W) on the most idle "
                                                 "rank, PP = 2D stages", 6,
                                                 "PP+1 = 2D+1 on every rank", 9, "2x")))
    out.append(result_row("1f1b", 8, 32, 7 / 39, 7 / 39,
                          closed_form=closed(7 / 39, "(D-1)(F+B)", 21, "D-r on rank r", 8)))
    return out


def test_bubble_table_puts_closed_form_beside_simulated():
    text = report.build_report(rows(), "r.jsonl")
    assert "### D = 4, costs F=1,B=2" in text
    assert "| schedule | N=4 | N=8 | N=16 | closed form |" in text
    gpipe_row = next(row for row in text.splitlines()
                     if row.startswith("| gpipe |") and "0.2727 (0.2727)" in row)
    assert gpipe_row.endswith("| `(D-1)/(D-1+N)` |")
    assert "| 1f1b | invalid |" in text  # D=8, N=4 is not allowed for 1F1B


def test_dualpipe_table_takes_formulas_and_values_from_the_records():
    text = report.build_report(rows(), "r.jsonl")
    assert "### PP = 8, N = 16" in text and "### PP = 8, N = 32" in text
    lines = text.splitlines()
    one = next(row for row in lines if row.startswith("| 1F1B | `1f1b` D=8 |"))
    assert one.startswith("| 1F1B | `1f1b` D=8 | `(D-1)(F+B)` = 21 | ")
    assert one.endswith(" | 1x; simulated 1× | `D-r on rank r` = 8 | 8 |")
    zb = next(row for row in lines if row.startswith("| ZB1P | `zb-h1` D=8 |"))
    assert "`(D-1)(F+I-W) when W <= F, I` = 7" in zb and zb.endswith("| 8 |")
    dual = next(row for row in lines if row.startswith("| DualPipe | `dualpipe` D=8 |"))
    assert "`(PP/2-1)(F&B+B-3W) on the most idle rank, PP = D` = 6" in dual
    assert "2x; simulated 2×" in dual and "`PP+1 on every rank` = 9 | 9 |" in dual
    # simulated idle per rank comes from the rows: makespan 10 x bubble 0.05
    assert "| 0.5 |" in dual
    dualv = next(row for row in lines if row.startswith("| DualPipeV | `dualpipev` D=4 |"))
    assert "PP = 2D stages` = 6" in dualv and "2x; simulated 4×" in dualv
    # the paper's columns are explained
    assert "*Bubble* is the idle time of a pipeline rank" in text
    assert "*Activation* is the peak number of micro-batch activations" in text


def test_dualpipe_table_says_when_the_costs_do_not_meet_the_formulas_condition():
    data = rows()
    for r in data:
        if r.get("schedule") == "zb-h1":  # e.g. costs with W > F: ppbench states no value
            r["closed_form"]["idle_per_rank"] = None
        if r.get("schedule") == "dualpipe":
            r["closed_form"]["idle_per_rank"] = None
            r["closed_form"]["note"] = "F&B < B: the reference's overlap does not hold"
    text = report.build_report(data, "r.jsonl")
    zb = next(row for row in text.splitlines() if row.startswith("| ZB1P |"))
    assert ("`(D-1)(F+I-W) when W <= F, I`: — (not defined for costs F=1,B=2,I=1,W=1,FB=3: "
            "they do not satisfy its condition)") in zb
    dual = next(row for row in text.splitlines() if row.startswith("| DualPipe |"))
    assert "— (F&B < B: the reference's overlap does not hold)" in dual


def test_report_evaluates_no_formula_of_its_own():
    """The closed forms live in ppbench's registry only: the report keeps no formula code."""
    assert not any(hasattr(m, "PAPER_METHODS") for m in REPORT_MODULES)
    assert all(isinstance(label, str) and isinstance(schedule, str)
               for label, schedule in report_theory.PAPER_ROWS)
    for m in REPORT_MODULES:
        source = (SCRIPTS / f"{m.__name__}.py").read_text()
        assert "lambda c, pp" not in source and "Fraction(" not in source, m.__name__
    # a record with other closed-form values gets those values, whatever the costs
    data = rows()
    for r in data:
        if r.get("status") == "ok" and r["schedule"] == "1f1b" and r["devices"] == 8:
            r["closed_form"]["idle_per_rank"] = 123.5
            r["closed_form"]["idle_formula"] = "X(D)"
    assert "| 1F1B | `1f1b` D=8 | `X(D)` = 123.5 |" in report.build_report(data, "r.jsonl")


def test_header_names_source_commit_date_and_machine():
    text = report.build_report(rows(), "results/theory.jsonl")
    head = "\n".join(text.splitlines()[:12])
    assert "Generated" in head and "results/theory.jsonl" in head
    assert "c0ffee1" in head and "2026-11-21T10:00:00Z" in head
    assert "box" in head and "Xeon" in head


def test_missing_points_say_not_run():
    text = report.build_report([result_row("gpipe", 4, 8, 0.27, 0.27)], "r.jsonl")
    assert "| DualPipe | `dualpipe` D=8 | not run |" in text
    assert "| 1F1B | 4/4·A = 1.00·A | — | not run |" in text


def test_cli_writes_report_atomically(tmp_path):
    results = write_jsonl(tmp_path / "r.jsonl", rows())
    out = tmp_path / "out" / "REPORT.md"
    run = subprocess.run([sys.executable, str(SCRIPTS / "report.py"), str(results), "--out",
                          str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert out.read_text().startswith("# ppbench results")
    assert [p.name for p in out.parent.iterdir()] == ["REPORT.md"]


def test_cli_fails_on_empty_results(tmp_path):
    results = tmp_path / "empty.jsonl"
    results.write_text("")
    # An empty results file is bad input (the contract's exit 2, one line).
    assert run("report", report.main, [str(results), "--out", str(tmp_path / "R.md")]) == 2


# --- 4. measured runs ------------------------------------------------------------------------

from conftest import run_row  # noqa: E402


def measured_rows() -> list[dict]:
    return [
        run_row("1f1b", 4, 8, 0.40, 0.385, closed=3 / 11,
                measured_bytes=[8 * 2**20, 6 * 2**20, 4 * 2**20, 2 * 2**20],
                model_bytes=[9 * 2**20, 6 * 2**20, 4 * 2**20, 2 * 2**20]),
        run_row("gpipe", 4, 8, 0.30, 0.31, closed=3 / 11),
        run_row("zb-h1", 2, 4, 0.2, 0.25, closed=None),
        run_row("1f1b", 4, 2, 0, 0, status="invalid"),
        run_row("1f1b", 2, 8, 0.1, 0.09, workload="mlp", flags="--layers 8 --width 512"),
    ]


def test_measured_section_has_gap_closed_form_throughput_and_bytes(fake_ppbench):
    registry = results_io.schedule_registry(fake_ppbench[0])
    text = report.build_report(rows(), "results/theory.jsonl", measured=measured_rows(),
                               measured_source="results/cpu.jsonl", registry=registry)
    records = section(text, "All schedules together")
    assert "### 9.2 Measured records" not in records  # numbered as the sections present
    assert "Measured records" in records and "results/cpu.jsonl" in records
    assert "(5 points: 1 invalid, 4 ok)" in records
    assert "-5.0 … +1.5 percentage points" in records
    one = section(text, "PipeDream-Flush / 1F1B (DAPPLE)")
    assert "Bubble fraction: theory, simulation and measurement" in one
    assert "#### transformer, `--preset tiny-llama`, b 2, dtype f32, steps 3, warm-up 1" in one
    assert "#### mlp, `--layers 8 --width 512`" in one
    # theory, simulation at uniform costs (rows(): 1f1b D=4 N=8 simulated 3/11), simulation with
    # the measured costs, measurement, gap
    line = next(row for row in one.splitlines() if row.startswith("| 1f1b | 4 | 8 |"))
    assert line == ("| 1f1b | 4 | 8 | 0.2727 | 0.2727 | 0.3850 | 0.4000 | +1.5 | 32 | 500 "
                    "| 8 / 9 |")
    # a run without a closed-form value: a dash, not a crash
    assert "| 1f1b | 2 | 8 | — | 0.1111 | 0.0900 | 0.1000 | +1.0 |" in one
    assert "| gpipe |" not in one.split("### 2.2", 1)[-1]  # GPipe's runs are under GPipe
    gpipe = section(text, "GPipe")
    assert "| gpipe | 4 | 8 | 0.2727 | 0.2727 | 0.3100 | 0.3000 | -1.0 |" in gpipe
    zb = section(text, "Zero Bubble")
    line = next(row for row in zb.splitlines() if row.startswith("| zb-h1 | 2 | 4 |"))
    # no simulated record of zb-h1 at D=2 in rows(): dashes, not a crash
    assert line.startswith("| zb-h1 | 2 | 4 | — | — | 0.2500 | 0.2000 | -5.0 |")
    # each measured table names the machine and commit of its measurement column
    assert ("Measurement column: commit beef123; machine: host benchbox, CPU EPYC 9999 "
            "(2 cores)") in zb
    assert "**What differs and why.** Measurement − simulation with measured costs: " \
           "-5.0 … -5.0 percentage points over 1 points" in zb


def test_runs_under_mpirun_or_on_gpus_get_their_own_table_beside_the_threads():
    threads = run_row("1f1b", 2, 8, 0.1, 0.09, workload="mlp", flags="--layers 8 --width 512")
    mpi = run_row("1f1b", 2, 8, 0.3, 0.2, workload="mlp", flags="--layers 8 --width 512",
                  launch={"transport": "mpi", "processes": 2})
    mpi["point"] = {**mpi["point"], "launcher": "mpirun", "replicas": 1}
    dp = run_row("1f1b", 1, 8, 0.0, 0.0, workload="mlp", flags="--layers 8 --width 512")
    dp["point"] = {**dp["point"], "devices": 1, "launcher": "mpirun", "replicas": 2}
    gpu = run_row("1f1b", 2, 8, 0.2, 0.1, workload="mlp", flags="--layers 8 --width 512")
    gpu["point"] = {**gpu["point"], "backend": "cuda", "gpus": True}
    gpu["backend"] = "cuda"
    text = report.build_report(rows(), "r.jsonl", measured=[threads, mpi, dp, gpu],
                               measured_source="cpu.jsonl")
    titles = [row for row in text.splitlines() if row.startswith("#### mlp")]
    assert titles == [
        "#### mlp, `--layers 8 --width 512`, b 2, dtype f32, steps 3, warm-up 1",
        "#### mlp, `--layers 8 --width 512`, b 2, dtype f32, steps 3, warm-up 1, "
        "2 processes under mpirun",
        "#### mlp, `--layers 8 --width 512`, b 2, dtype f32, steps 3, warm-up 1, "
        "2 processes under mpirun (2 replicas)",
        "#### mlp, `--layers 8 --width 512`, b 2, dtype f32, steps 3, warm-up 1, "
        "cuda, 2 GPUs, one per rank"], titles
    mpi_table = text[text.index("2 processes under mpirun\n"):]
    assert mpi_table.split("\n#### ")[0].count("| 0.2000 | 0.3000 | +10.0 |") == 1


def test_measured_section_names_the_machine():
    text = report.build_report(rows(), "r.jsonl", measured=measured_rows(),
                               measured_source="cpu.jsonl")
    records = section(text, "All schedules together")
    assert "CPU EPYC 9999, 2 cores, host benchbox" in records
    assert "beef123" in records and "2026-11-21T06:00:00Z" in records


def test_no_measured_tables_without_measured_rows():
    text = report.build_report(rows(), "r.jsonl")
    assert "theory, simulation and measurement" not in text and "Measured records" not in text
    # the bubble tables say why they have no measurement column
    assert "No measured run of these schedules is in the records given (no CPU or GPU run " \
           "yet), so there is no measurement column." in section(text, "GPipe")


def test_cli_measured_option(tmp_path):
    theory = write_jsonl(tmp_path / "t.jsonl", rows())
    cpu = write_jsonl(tmp_path / "cpu.jsonl", measured_rows())
    out = tmp_path / "REPORT.md"
    assert report.main([str(theory), "--measured", str(cpu), "--out", str(out)]) == 0
    assert "Bubble fraction: theory, simulation and measurement" in out.read_text()
    assert run("report", report.main, [str(theory), "--measured",
                                       str(tmp_path / "absent.jsonl"), "--out", str(out)]) == 2


def test_cli_measured_files_are_read_in_order_and_a_later_row_of_a_point_wins(tmp_path):
    # Two GPU calls' sweeps: the second re-ran 1f1b D=4 N=8 and added gpipe.
    theory = write_jsonl(tmp_path / "t.jsonl", rows())
    first = write_jsonl(tmp_path / "a.jsonl", [run_row("1f1b", 4, 8, 0.40, 0.385)])
    second = write_jsonl(tmp_path / "b.jsonl", [run_row("1f1b", 4, 8, 0.32, 0.3, closed=3 / 11),
                                                run_row("gpipe", 4, 8, 0.35, 0.33)])
    out = tmp_path / "REPORT.md"
    assert report.main([str(theory), "--measured", str(first), "--measured", str(second),
                        "--out", str(out), "--title", "ppbench results on a GPU"]) == 0
    text = out.read_text()
    assert text.startswith("# ppbench results on a GPU\n")
    assert f"`{first}, {second}`" in text
    one_f_one_b = section(text, "2. PipeDream-Flush / 1F1B (DAPPLE)")
    assert "| 1f1b | 4 | 8 | 0.2727 | " in one_f_one_b
    assert "| 0.3000 | 0.3200 | +2.0 |" in one_f_one_b
    assert "0.3850" not in one_f_one_b
    assert "| gpipe | 4 | 8 | " in section(text, "1. GPipe")


# --- schedule order from `ppbench list --format json` ------------------------------------------

from conftest import calls  # noqa: E402


def test_schedule_order_comes_from_the_registry_once(fake_ppbench):
    binary, log = fake_ppbench
    results_io._REGISTRY.clear()
    registry = results_io.schedule_registry(binary)
    assert results_io.schedule_registry(binary) is registry  # run once per process
    assert [c for c in calls(log, probes=True) if c[:1] == ["list"]] == [["list", "--format",
                                                                         "json"]]
    names = [s["name"] for s in registry]
    assert names[:3] == ["naive", "gpipe", "1f1b"] and names[-1] == "dualpipev"
    data = [result_row("zb-h1", 2, 4, 0.1, None), result_row("gpipe", 2, 4, 0.1, None),
            result_row("mystery", 2, 4, 0.1, None)]
    assert results_io.schedule_order(registry, data)[:2] == ["naive", "gpipe"]
    assert results_io.schedule_order(registry, data)[-1] == "mystery"  # unknown ones last
    # without a ppbench (tests, a machine without a build): the order of the data
    assert results_io.schedule_registry(None) is None
    assert results_io.schedule_order(None, data) == ["zb-h1", "gpipe", "mystery"]


def test_report_tables_follow_the_registry_not_the_data(fake_ppbench):
    # gpipe named first by the data; the registry lists naive first
    data = [result_row("gpipe", 4, n, 0.2, 0.2) for n in (4, 8)] + \
        [result_row("naive", 4, n, 0.75, 0.75) for n in (4, 8)] + \
        [result_row("mystery", 4, n, 0.1, None) for n in (4, 8)]
    registry = results_io.schedule_registry(fake_ppbench[0])
    ordered = report.build_report(data, "r.jsonl", registry=registry)
    assert "in the registry's order" in ordered
    gpipe = section(ordered, "GPipe")
    assert gpipe.index("| naive |") < gpipe.index("| gpipe |")
    by_data = section(report.build_report(data, "r.jsonl"), "GPipe")
    assert by_data.index("| gpipe |") < by_data.index("| naive |")
    # a family no paper claims is not lost: it has a section of its own
    other = section(ordered, "Other schedules")
    assert "| mystery |" in other and "| gpipe |" not in other


def test_scripts_keep_no_schedule_list_of_their_own():
    import plot_bubble
    import plot_memory

    assert not any(hasattr(m, "SCHEDULE_ORDER") for m in REPORT_MODULES)
    assert not hasattr(plot_bubble, "SCHEDULE_ORDER")
    assert not hasattr(plot_memory, "DEFAULT_SCHEDULES")
    for name in [f"{m.__name__}.py" for m in REPORT_MODULES] + [
            "plot_bubble.py", "plot_memory.py", "plot_timeline.py"]:
        text = (SCRIPTS / name).read_text()
        assert '"zb-h2", "zb-v"' not in text and "'zb-h2', 'zb-v'" not in text, name


def test_cli_with_a_missing_ppbench_is_exit_2(tmp_path):
    theory = write_jsonl(tmp_path / "t.jsonl", rows())
    assert run("report", report.main, [str(theory), "--out", str(tmp_path / "R.md"), "--ppbench",
                                       str(tmp_path / "absent")]) == 2
    assert not (tmp_path / "R.md").exists()


# --- the latest records beside the committed reference ----------------------------------------

def reference_rows() -> list[dict]:
    """The committed records: another commit on another machine, somewhat slower."""
    out = []
    for r in measured_rows():
        r = json.loads(json.dumps(r))
        if r.get("status") == "ok":
            r["provenance"].update(git_commit="0ld0ld0", host="refbox", cpu="Xeon Ref",
                                   date="2026-01-01T00:00:00Z")
            r["measured"]["bubble_fraction"] += 0.05
            r["throughput"]["samples_per_s"] /= 2
        out.append(r)
    return out


def test_measured_tables_set_the_reference_beside_the_latest():
    text = report.build_report(rows(), "results/latest/theory.jsonl", measured=measured_rows(),
                               measured_source="results/latest/cpu.jsonl",
                               reference_measured=reference_rows(),
                               reference_measured_source="results/reference/cpu.jsonl")
    records = section(text, "All schedules together")
    assert "CPU EPYC 9999, 2 cores, host benchbox" in records and "beef123" in records
    assert "the reference `results/reference/cpu.jsonl` (5 points): commit 0ld0ld0" in records
    one = section(text, "PipeDream-Flush / 1F1B (DAPPLE)")
    assert "Reference columns: `results/reference/cpu.jsonl`, commit 0ld0ld0; machine: host " \
           "refbox, CPU Xeon Ref" in one
    assert "| ref. measurement | ref. samples/s |" in one
    line = next(row for row in one.splitlines() if row.startswith("| 1f1b | 4 | 8 |"))
    assert line.endswith("| 8 / 9 | 0.4500 | 16 |")
    five = section(text, "Latest against the reference")
    assert "latest measured: `results/latest/cpu.jsonl`, commit beef123" in five
    assert "reference measured: `results/reference/cpu.jsonl`, commit 0ld0ld0" in five
    assert "over the 4 points ok in both: median 2×" in five


def test_simulated_records_are_checked_against_the_reference():
    latest = rows()
    reference = json.loads(json.dumps(rows()))
    for r in reference:
        if r.get("status") == "ok":
            r["provenance"]["git_commit"] = "0ld0ld0"
    changed = next(r for r in reference if r.get("schedule") == "gpipe" and r["devices"] == 4
                   and r["microbatches"] == 8)
    changed["bubble_fraction"] = 0.5
    text = report.build_report(latest, "results/latest/theory.jsonl", reference=reference,
                               reference_source="results/reference/theory.jsonl")
    head = text[:text.index("## Contents")]
    assert "- reference: `results/reference/theory.jsonl`" in head and "0ld0ld0" in head
    five = section(text, "Latest against the reference")
    points = len(results_io.latest_rows(latest, key=report_measured.point_id))
    assert f"simulated points in both: {points}" in five
    assert f": {points - 1}; different: 1" in five
    assert "gpipe D=4 N=8, costs F=1,B=2: bubble_fraction 0.5 → 0.2727" in five


def test_a_later_line_of_a_point_replaces_the_earlier_one(tmp_path):
    first = result_row("gpipe", 4, 8, 0.9, 0.9)
    second = result_row("gpipe", 4, 8, 3 / 11, 3 / 11)
    path = write_jsonl(tmp_path / "t.jsonl", [first, result_row("1f1b", 4, 8, 0.2, 0.2), second])
    rows_read = results_io.load_records(path)
    assert [(r["schedule"], r["bubble_fraction"]) for r in rows_read] == [
        ("gpipe", 3 / 11), ("1f1b", 0.2)]


def test_ppbench_json_returns_the_record_or_raises_with_the_contracts_exit_code(fake_ppbench):
    binary, _ = fake_ppbench
    args = ["simulate", "--schedule", "1f1b", "--devices", "4", "--format", "json"]
    assert results_io.ppbench_json(binary, [*args, "--microbatches", "8"])["schedule"] == "1f1b"
    with pytest.raises(results_io.PpbenchError) as refused:
        results_io.ppbench_json(binary, [*args, "--microbatches", "2"])
    assert refused.value.code == 2 and "--microbatches 2: exit 2" in str(refused.value)
    crash = ["simulate", "--schedule", "crash", "--devices", "4", "--microbatches", "8"]
    with pytest.raises(results_io.PpbenchError) as crashed:
        results_io.ppbench_json(binary, crash)
    assert crashed.value.code == 1


def test_zb_table5_section_sets_ppbench_beside_the_paper():
    table = {"source": "the paper: Table 5", "definition": "bubble rate = (cost - m(F+B+W)) / cost",
             "columns": ["1F1B", "ZB-2p"],
             "rows": [{"model": "1.5B", "p": 8, "m": 24,
                       "costs": {"F": 18.5, "B": 18.1, "W": 9.3, "comm": 0.6},
                       "paper": {"1F1B": 0.2431, "ZB-2p": 0.0433},
                       "ppbench": {"1F1B": 0.24312, "ZB-2p": 0.1015}}]}
    text = report.build_report(rows(), "results/latest/theory.jsonl", zb_table5=table,
                               zb_table5_source="results/reference/zb_table5.json")
    zb = section(text, "Zero Bubble")
    assert "Source: the paper: Table 5; from `results/reference/zb_table5.json`" in zb
    # the paper's table comes before the bubble tables of the section
    assert zb.index("Table 5: bubble rates") < zb.index("Bubble fraction: theory and simulation")
    assert "| 1.5B | 8 | 24 | 18.5 / 18.1 / 9.3 / 0.6 | 0.2431 (0.2431) | 0.1015 (0.0433) |" in zb
    assert "in every row: 1F1B. ZB-2p: 1 of 1 rows differ, ppbench +0.0582 … +0.0582" in zb
    assert "Table 5" not in report.build_report(rows(), "results/latest/theory.jsonl")


def test_step_time_against_the_replay_splits_points_by_whether_ranks_share_cores():
    def timed(d: int, measured_s: float, replicas: int = 1) -> dict:
        row = run_row("1f1b", d, 8, 0.1, 0.1, workload="mlp", flags="--layers 8 --width 512")
        row["measured"] = {**row["measured"], "makespan": measured_s}
        row["predicted"] = {**row["predicted"], "makespan": 1.0}
        row["point"] = {**row["point"], "replicas": replicas}
        return row

    # 2 cores: D=2 (+2 %, +8 %) and D=1 x 2 replicas (-1 %) have a core per rank; D=4 (+40 %)
    # and D=2 x 2 replicas (+3 %) share them.
    points = [timed(2, 1.02), timed(2, 1.08), timed(1, 0.99, replicas=2), timed(4, 1.40),
              timed(2, 1.03, replicas=2)]
    assert report_measured.step_time_sentence(points) == (
        "Measured step against the replay's makespan: within 5 % at 2 of 3 points "
        "(-1.0 … +8.0 %) with a core per rank (≤ 2 ranks); within 5 % at 1 of 2 points "
        "(+3.0 … +40.0 %) where ranks share the 2 cores.")
    # a row without a replayed makespan counts nowhere; no rows at all, no sentence
    broken = timed(2, 1.5)
    broken["predicted"] = {"bubble_fraction": 0.1}
    assert "at 2 of 3 points" in report_measured.step_time_sentence(points + [broken])
    assert report_measured.step_time_sentence([broken]) == ""
    text = report.build_report(rows(), "r.jsonl", measured=points, measured_source="cpu.jsonl")
    assert ("- measured step against the replay's makespan: within 5 % at 2 of 3 points") in text
    # records whose replay shared the cores among the ranks (predicted.cores) say so
    for row in points:
        if row["devices"] * row["point"]["replicas"] > 2:
            row["predicted"]["cores"] = 2
    assert report_measured.step_time_sentence(points).endswith(
        "where ranks share the 2 cores (replayed on those cores).")
    why = report_measured.measured_differences(points, {})
    assert ("2 of these points run more ranks than the machine's 2 cores. Their replay shares"
            in why[0])


def test_a_family_without_a_published_formula_is_said_apart():
    cf = closed(None, "none published", None, "", None)
    cf["bubble_formula"] = "none published"
    conditional = closed(None, "(D-1)(F+B)", None, "D", None)
    rows_ = [result_row("chimera-doubling", 4, n, 0.05, None, closed_form=cf) for n in (8, 16)]
    rows_.append(result_row("1f1b", 4, 8, 0.3, None, closed_form=conditional))
    text = " ".join(report_theory.bubble_differences(rows_))
    assert "1 points have no closed-form value: the formula holds only under" in text
    assert "2 points are of a schedule whose paper publishes no bubble formula" in text
    assert "(chimera-doubling)" in text and "none published" not in text


# --- the comm axis, each machine's cores, throughput ratios, labels ---------------------------

def at_comm(row: dict, comm: float, bubble: float) -> dict:
    """`row` simulated again with hand-over time `comm` (the sweep's comm axis)."""
    row = json.loads(json.dumps(row))
    row["comm"] = row["point"]["comm"] = comm
    row["bubble_fraction"] = bubble
    for rank in row.get("ranks") or []:
        rank["idle"] = row["makespan"] * bubble
    return row


def test_points_at_another_comm_are_tables_of_their_own_not_overwrites():
    # They were keyed without comm: the comm 0.5 rows replaced the comm 0 cells silently.
    base = rows()
    slow = [at_comm(r, 0.5, 0.9) for r in base if r.get("status", "ok") == "ok"]
    text = report.build_report(base + slow, "r.jsonl")
    plain = text[text.index("#### D = 4, costs F=1,B=2\n"):]
    plain = plain[:plain.index("\n#### ")]
    assert "0.2727 (0.2727)" in plain and "0.9000" not in plain
    assert "#### D = 4, costs F=1,B=2, comm 0.5\n" in text
    # the DualPipe table and the worked example take the comm 0 rows
    dual = next(line for line in text.splitlines() if line.startswith("| DualPipe | `dualpipe`"))
    assert "= 6 | 0.5 |" in dual  # the simulated idle: 10 x 0.05, not 10 x 0.9
    # a measured point's uniform simulation is the comm 0 one
    index = report_measured.theory_index(base + slow)
    run = {**result_row("gpipe", 4, 8, 0.3, 0.3), "closed_form_cost": "F=1,B=2"}
    assert index[report_measured.uniform_key(run)]["bubble_fraction"] == pytest.approx(3 / 11)


def test_a_run_shares_cores_only_beyond_its_own_machines_cores():
    # The fewest cores over all records was applied to every row: an 8-core machine's D = 4
    # runs were said to share 2 cores.
    def on(cores: int, d: int) -> dict:
        row = run_row("1f1b", d, 8, 0.1, 0.1, workload="mlp", flags="--layers 8 --width 512")
        row["provenance"] = {**row["provenance"], "cpu_cores": cores}
        row["measured"] = {**row["measured"], "makespan": 1.0}
        row["predicted"] = {**row["predicted"], "makespan": 1.0}
        return row

    points = [on(2, 2), on(8, 4), on(8, 8), on(2, 4)]
    assert report_measured.step_time_sentence(points) == (
        "Measured step against the replay's makespan: within 5 % at 3 of 3 points "
        "(+0.0 … +0.0 %) with a core per rank (≤ 2 or 8 ranks, by machine); within 5 % at 1 of "
        "1 points (+0.0 … +0.0 %) where ranks share the 2 cores.")
    why = report_measured.measured_differences(points, {})[0]
    assert "1 of these points run more ranks than the machine's 2 cores" in why
    assert report_measured.step_time_sentence([on(2, 4), on(8, 16)]).endswith(
        "where ranks share their machine's 2 or 8 cores.")


def test_a_throughput_ratio_says_which_points_it_leaves_out():
    def point(n: int, sps: float) -> dict:
        row = run_row("1f1b", 2, n, 0.1, 0.1)
        row["throughput"] = {"samples_per_s": sps}
        return row

    latest = [point(4, 10.0), point(8, 0.0), point(16, 30.0)]
    reference = [point(4, 5.0), point(8, 5.0), point(16, 10.0)]
    text = report.build_report(rows(), "r.jsonl", measured=latest, measured_source="cpu.jsonl",
                               reference_measured=reference, reference_measured_source="ref")
    assert ("- samples/s latest ÷ reference over 2 of the 3 points ok in both (1 left out: their "
            "samples/s is 0 or missing on one side): median 2.5×, range 2× … 3×") in text
    assert report_reference.throughput_ratios([]) == [
        "- no point is ok in both, so no throughput is compared"]


@pytest.mark.parametrize("line, words", [
    ('{"schedule": "1f1b", "devices": 2, "microbatches": 4, "bubble_fraction": NaN}',
     "NaN is not a JSON number"),
    ('{"schedule": "1f1b", "devices": 2, "microbatches": 4, "step_time_s": 1e999}',
     "1e999 is too large for a double"),
])
def test_a_record_with_a_non_finite_number_is_named_not_read_as_nan(
        tmp_path, capsys, line, words):
    path = tmp_path / "r.jsonl"
    path.write_text(line + "\n")
    assert run("report", report.main, [str(path), "--out", str(tmp_path / "R.md")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"records {path}:1: {words}" in err[0], err
    assert not (tmp_path / "R.md").exists()


@pytest.mark.parametrize("field_, value", [("step_time_s", "0.5"), ("throughput", None)])
def test_a_measured_field_of_another_kind_is_named(tmp_path, capsys, field_, value):
    row = run_row("1f1b", 2, 4, 0.1, 0.1)
    if field_ == "throughput":
        row["throughput"] = {"samples_per_s": "fast"}
    else:
        row[field_] = value
    path = write_jsonl(tmp_path / "cpu.jsonl", [row])
    theory = write_jsonl(tmp_path / "t.jsonl", rows())
    assert run("report", report.main, [str(theory), "--measured", str(path), "--out",
                                       str(tmp_path / "R.md")]) == 2
    err = capsys.readouterr().err
    assert ("throughput.samples_per_s 'fast'" if field_ == "throughput" else
            "step_time_s '0.5'") in err and "a finite number" in err


def test_captions_and_headers_say_what_is_drawn_and_which_b():
    table = {"source": "the paper", "definition": "rate", "columns": ["1F1B"],
             "rows": [{"model": "1.5B", "p": 8, "m": 24,
                       "costs": {"F": 1, "B": 2, "W": 1, "comm": 0.5},
                       "ppbench": {"1F1B": 0.2}, "paper": {"1F1B": 0.2}}]}
    zb = report_tables.zb_table5_section(table, "zb.json")
    assert "| Model | p | m | F / B (ppbench's I) / W / comm, ms | 1F1B |" in zb
    import plot_bubble
    assert plot_bubble.figure_costs("bubble_default.png") == ("", 0.0)
    assert plot_bubble.figure_costs("bubble_F1_I1_W1.png") == ("F=1,I=1,W=1", 0.0)
    assert plot_bubble.figure_costs("bubble_F1_B2_comm0.5.png") == ("F=1,B=2", 0.5)
    for cost, comm in (("", 0.0), ("F=1,B=2", 0.5), ("F=1.5,I=1,W=1", 1e-05)):
        assert plot_bubble.figure_costs(f"bubble_{plot_bubble.file_slug(cost, comm)}.png") == \
            (cost, comm)


def test_the_figure_captions_name_the_costs_and_the_memory_line_in_gib(tmp_path):
    figures = tmp_path / "plots"
    figures.mkdir()
    for name in ("bubble_default.png", "bubble_F1_B2_comm0.5.png", "memory_8b_pp_seq.png"):
        (figures / name).write_bytes(b"\x89PNG")
    text = report.build_report(rows(), "r.jsonl", figures=report.Figures([figures], tmp_path))
    assert "closed form (lines), costs default*" in text
    assert "closed form (lines), costs F=1,B=2, comm 0.5*" in text
    assert "costs default=" not in text
    assert ("memory in GiB against D and sequence length, one panel per sequence length, each on "
            "its own y-scale; the dashed line is 80 GiB, one GPU's memory") in text
    assert "80 GB" not in text
