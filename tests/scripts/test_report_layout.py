"""The report's layout by paper (scripts/report.py, scripts/report_papers.py): section order, the
contents list, each table's source and measuring machine, figures, and dashes where data is
missing."""

from __future__ import annotations

import base64
import re

import report
import report_papers
from conftest import run_row
from test_gpipe_tables import fake_table
from test_report import reference_rows, rows, section

# A 1x1 PNG: the smallest file a figure folder can hold.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwAD"
                       "hgGAWjR9awAAAABJRU5ErkJggg==")


def zb_table() -> dict:
    return {"source": "Qi et al.: Table 5", "definition": "bubble rate", "columns": ["1F1B"],
            "rows": [{"model": "1.5B", "p": 8, "m": 24,
                      "costs": {"F": 1, "B": 1, "W": 1, "comm": 0},
                      "paper": {"1F1B": 0.2431}, "ppbench": {"1F1B": 0.2431}}]}


def full_report(**extra) -> str:
    measured = [run_row("1f1b", 4, 8, 0.40, 0.385, closed=3 / 11),
                run_row("gpipe", 4, 8, 0.30, 0.31, closed=3 / 11),
                run_row("interleaved-1f1b", 2, 4, 0.2, 0.15),
                run_row("chimera", 2, 4, 0.3, 0.2)]
    return report.build_report(rows(), "results/reference/theory.jsonl", measured=measured,
                               measured_source="results/reference/cpu.jsonl",
                               reference_measured=reference_rows(),
                               reference_measured_source="old/cpu.jsonl",
                               gpipe_tables=fake_table(), gpipe_tables_source="g.json",
                               zb_table5=zb_table(), zb_table5_source="zb.json", **extra)


def top_headings(text: str) -> list[str]:
    return [line[3:] for line in text.splitlines() if line.startswith("## ")]


def test_sections_come_by_paper_in_publication_order_then_the_shared_ones():
    text = full_report()
    assert top_headings(text) == [
        "Contents", "1. GPipe", "2. PipeDream-Flush / 1F1B (DAPPLE)",
        "3. Megatron-LM interleaved 1F1B", "4. Chimera", "5. Zero Bubble", "6. DualPipe",
        "7. The lectures' textbook examples", "8. All schedules together",
        "9. Latest against the reference"]
    # a paper with no data has no section (no data x pipeline file given here)
    assert "Data x pipeline" not in text


def test_the_contents_list_links_every_section_by_its_anchor():
    text = full_report()
    links = re.findall(r"^- \[(.+)\]\(#(.+)\)$", text[text.index("## Contents"):
                                                      text.index("## 1.")], re.M)
    assert [title for title, _ in links] == top_headings(text)[1:]
    assert links[1] == ("2. PipeDream-Flush / 1F1B (DAPPLE)", "2-pipedream-flush--1f1b-dapple")
    assert all(anchor == report_papers.slug(title) for title, anchor in links)


def test_each_schedule_lands_under_its_paper():
    text = full_report()
    assert "| interleaved-1f1b |" in section(text, "Megatron-LM interleaved 1F1B")
    assert "| chimera |" in section(text, "Chimera")
    assert "| chimera |" not in section(text, "GPipe")
    dual = section(text, "DualPipe")
    # the paper's Table 2 first, then the bubble tables of its two schedules
    assert dual.index("Table 2: bubble, parameters and activations") < \
        dual.index("Bubble fraction: theory and simulation")
    assert "| dualpipe |" in dual and "| dualpipev |" in dual


def test_every_table_names_its_source_and_ends_with_what_differs():
    text = full_report()
    for title in ("GPipe", "PipeDream-Flush / 1F1B (DAPPLE)", "Megatron-LM interleaved 1F1B",
                  "Chimera", "Zero Bubble", "DualPipe"):
        body = section(text, title)
        assert body.count("Source: ") >= 2, title  # the paper, then each subsection's data
        subsections = [s for s in body.split("\n### ")[1:] if "\n|" in s]
        for sub in subsections:
            assert "Source: " in sub and "**What differs and why.**" in sub, (title, sub[:60])


def test_measured_columns_name_their_machine_and_commit_from_the_records():
    text = full_report()
    one = section(text, "PipeDream-Flush / 1F1B (DAPPLE)")
    assert "Measurement column: commit beef123; machine: host benchbox, CPU EPYC 9999 " \
           "(2 cores); dates 2026-11-21T06:00:00Z." in one
    assert "Reference columns: `old/cpu.jsonl`, commit 0ld0ld0; machine: host refbox" in one
    # not invented: a record without provenance says unknown
    bare = run_row("1f1b", 4, 8, 0.4, 0.385)
    del bare["provenance"]
    text = report.build_report(rows(), "t.jsonl", measured=[bare], measured_source="c.jsonl")
    assert "Measurement column: commit unknown; machine: host unknown, CPU unknown (unknown " \
           "cores)" in section(text, "PipeDream-Flush / 1F1B (DAPPLE)")


def test_missing_optional_fields_give_dashes_not_a_crash():
    sparse = run_row("1f1b", 4, 8, 0.4, 0.385)
    for key in ("predicted", "throughput", "step_time_s", "activation_bytes", "closed_form"):
        del sparse[key]
    text = report.build_report(rows(), "t.jsonl", measured=[sparse], measured_source="c.jsonl")
    line = next(row for row in section(text, "PipeDream-Flush / 1F1B (DAPPLE)").splitlines()
                if row.startswith("| 1f1b | 4 | 8 |"))
    assert line == "| 1f1b | 4 | 8 | — | 0.2727 | — | 0.4000 | — | — | — | — / — |"
    # a GPipe record without scaling runs, a table without the measured subsection
    table = fake_table()
    del table["scaling"]
    text = report.build_report(rows(), "t.jsonl", gpipe_tables=table, gpipe_tables_source="g")
    assert "Tables 2 and 3" in text and "Throughput against pipeline devices" not in text


def test_figures_are_linked_relative_to_the_report_and_absent_ones_left_out(tmp_path):
    plots = tmp_path / "plots" / "reference"
    plots.mkdir(parents=True)
    (plots / "timeline_gpipe.png").write_bytes(PNG)
    (plots / "bubble_F1_I1_W1.png").write_bytes(PNG)
    out_dir = tmp_path / "results"
    out_dir.mkdir()
    figures = report.Figures([tmp_path / "plots" / "latest", plots], out_dir)
    text = full_report(figures=figures)
    gpipe = section(text, "GPipe")
    assert "](../plots/reference/timeline_gpipe.png)" in gpipe
    assert "timeline_1f1b" not in text  # not drawn: not linked
    assert "costs F=1,I=1,W=1" in section(text, "All schedules together")
    # the first folder that holds a figure wins
    (tmp_path / "plots" / "latest").mkdir()
    (tmp_path / "plots" / "latest" / "timeline_gpipe.png").write_bytes(PNG)
    assert "](../plots/latest/timeline_gpipe.png)" in full_report(figures=figures)
