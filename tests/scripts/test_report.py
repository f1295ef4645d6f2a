"""Tests of scripts/report.py on synthetic sweep rows."""

from __future__ import annotations

import subprocess
import sys

import report
from conftest import SCRIPTS, result_row, write_jsonl


def rows() -> list[dict]:
    out = []
    for d in (2, 4, 8):
        for n in (4, 8, 16):
            closed = (d - 1) / (d - 1 + n)
            out.append(result_row("1f1b", d, n, closed, closed))
            out.append(result_row("gpipe", d, n, closed, closed))
    out.append(result_row("naive", 4, 8, 0.75, 0.75,
                          ranks=[{"rank": 0, "idle": 72, "peak_activations": 1,
                                  "peak_activation_share": 0.25}]))
    out.append(result_row("1f1b", 8, 4, 0, None, status="invalid"))
    for n in (16, 32):
        out.append(result_row("zb-h1", 8, n, 0.1, None))
        out.append(result_row("dualpipe", 8, n, 0.05, None, param_copies=2,
                              peak_activations=9))
        out.append(result_row("dualpipev", 4, n, 0.05, None, param_copies=2,
                              peak_activations=9))
    out.append(result_row("1f1b", 8, 32, 7 / 39, 7 / 39))
    return out


def test_bubble_table_puts_closed_form_beside_simulated():
    text = report.build_report(rows(), "r.jsonl")
    assert "### D = 4, costs F=1,B=2" in text
    assert "| schedule | N=4 | N=8 | N=16 | closed form |" in text
    gpipe_row = next(l for l in text.splitlines()
                     if l.startswith("| gpipe |") and "0.2727 (0.2727)" in l)
    assert gpipe_row.endswith("| `(D-1)/(D-1+N)` |")
    assert "| 1f1b | invalid |" in text  # D=8, N=4 is not allowed for 1F1B


def test_dualpipe_table_has_the_papers_formulas_and_simulated_values():
    text = report.build_report(rows(), "r.jsonl")
    assert "### PP = 8, N = 16" in text and "### PP = 8, N = 32" in text
    lines = text.splitlines()
    one = next(l for l in lines if l.startswith("| 1F1B | (PP−1)(F+B) = 21 |"))
    assert "| 1× (simulated 1×) | PP = 8 |" in one
    zb = next(l for l in lines if l.startswith("| ZB1P (zb-h1) | (PP−1)(F+B−2W) = 7 |"))
    assert zb.endswith("| 8 |")
    dual = next(l for l in lines if l.startswith("| DualPipe | (PP/2−1)(F&B+B−3W) = 6 |"))
    assert "2× (simulated 2×)" in dual and "PP+1 = 9" in dual and dual.endswith("| 9 |")
    assert any(l.startswith("| DualPipeV | (PP/2−1)(F&B+B−3W) = 6 |") for l in lines)
    # simulated idle per rank comes from the rows: makespan 10 x bubble 0.05
    assert "| 0.5 |" in dual


def test_activation_example_rows():
    text = report.build_report(rows(), "r.jsonl")
    assert "| naive model parallel | 1/4·A = 0.25·A | 0.25·A | 1 |" in text
    assert "| GPipe | 8/4·A = 2.00·A | 1.00·A | 4 |" in text
    assert "| 1F1B | 4/4·A = 1.00·A | 1.00·A | 4 |" in text


def test_header_names_source_commit_date_and_machine():
    text = report.build_report(rows(), "results/theory.jsonl")
    head = "\n".join(text.splitlines()[:12])
    assert "Generated" in head and "results/theory.jsonl" in head
    assert "c0ffee1" in head and "2026-11-21T10:00:00Z" in head
    assert "box" in head and "Xeon" in head


def test_missing_points_say_not_run():
    text = report.build_report([result_row("gpipe", 4, 8, 0.27, 0.27)], "r.jsonl")
    assert "| DualPipe | (PP/2−1)(F&B+B−3W) | not run |" in text
    assert "| 1F1B | 4/4·A = 1.00·A | not run |" in text


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
    assert report.main([str(results), "--out", str(tmp_path / "R.md")]) == 1


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


def test_measured_section_has_gap_closed_form_throughput_and_bytes():
    text = report.build_report(rows(), "results/theory.jsonl", measured=measured_rows(),
                               measured_source="results/cpu.jsonl")
    assert "## 4. Measured runs" in text and "results/cpu.jsonl" in text
    assert "(5 points: 1 invalid, 4 ok)" in text
    assert "### transformer, `--preset tiny-llama`, b 2, dtype f32, steps 3, warm-up 1" in text
    assert "### mlp, `--layers 8 --width 512`" in text
    line = next(l for l in text.splitlines() if l.startswith("| 1f1b | 8 | 0.4000 |"))
    assert line == "| 1f1b | 8 | 0.4000 | 0.3850 | +1.5 | 0.2727 | 32 | 500 | 8 / 9 |"
    zb = next(l for l in text.splitlines() if l.startswith("| zb-h1 | 4 |"))
    assert "| -5.0 | — |" in zb
    # schedules in the usual order within a D table
    d4 = text[text.index("#### D = 4"):]
    assert d4.index("| gpipe | 8 |") < d4.index("| 1f1b | 8 |")
    assert "-5.0 … +1.5 percentage points" in text


def test_measured_section_names_the_machine():
    text = report.build_report(rows(), "r.jsonl", measured=measured_rows(),
                               measured_source="cpu.jsonl")
    section = text[text.index("## 4."):]
    assert "CPU EPYC 9999, 2 cores, host benchbox" in section
    assert "beef123" in section and "2026-11-21T06:00:00Z" in section


def test_no_measured_section_without_measured_rows():
    assert "## 4." not in report.build_report(rows(), "r.jsonl")


def test_cli_measured_option(tmp_path):
    theory = write_jsonl(tmp_path / "t.jsonl", rows())
    cpu = write_jsonl(tmp_path / "cpu.jsonl", measured_rows())
    out = tmp_path / "REPORT.md"
    assert report.main([str(theory), "--measured", str(cpu), "--out", str(out)]) == 0
    assert "## 4. Measured runs" in out.read_text()
    assert report.main([str(theory), "--measured", str(tmp_path / "absent.jsonl"),
                        "--out", str(out)]) == 1
