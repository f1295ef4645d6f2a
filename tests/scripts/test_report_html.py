"""The report as one self-contained HTML page (scripts/report_html.py, report.py --html)."""

from __future__ import annotations

import re
import subprocess
import sys

import report_html
from conftest import SCRIPTS, run_row, write_jsonl
from test_report import rows
from test_report_layout import PNG


def test_tables_headings_lists_and_inline_markup():
    md = "\n".join([
        "# Title", "", "## 1. A / B (c)", "", "Some `code | pipe` and **bold** and *it*.", "",
        "- one", "  - nested", "- two", "",
        "| a | b |", "|---|---|", "| `x\\|y` | 2 |", "| 3 | [link](#1-a--b-c) |", "",
        "```sh", "make <report>", "```", "", "<!-- note -->"])
    page = report_html.markdown_to_html(md, SCRIPTS, "t")
    assert '<h2 id="1-a--b-c">1. A / B (c)</h2>' in page
    assert "<code>code | pipe</code>" in page and "<strong>bold</strong>" in page
    assert "<em>it</em>" in page
    assert "<li>one<ul>" in page and "<li>nested</li>" in page and "<li>two</li>" in page
    assert "<th>a</th><th>b</th>" in page and "<td><code>x|y</code></td><td>2</td>" in page
    assert '<a href="#1-a--b-c">link</a>' in page
    assert "<pre><code>make &lt;report&gt;</code></pre>" in page
    assert "<!-- note -->" in page


def test_images_are_embedded_and_urls_are_never_loaded(tmp_path):
    (tmp_path / "fig.png").write_bytes(PNG)
    md = "![a figure](fig.png)\n\n![remote](https://example.com/x.png)\n\n" \
         "![absent](nowhere.png)\n\nsee [the site](https://example.com)"
    page = report_html.markdown_to_html(md, tmp_path, "t")
    assert '<img src="data:image/png;base64,' in page
    assert "example.com/x.png" not in re.findall(r'src="([^"]*)"', page)
    assert not re.search(r'(src|href)="https?:', page)
    assert page.count('class="missing"') == 2  # the URL and the absent file are named, not linked
    assert "the site (https://example.com)" in page


def test_cli_writes_a_self_contained_page_with_every_table(tmp_path):
    plots = tmp_path / "plots"
    plots.mkdir()
    for name in ("timeline_gpipe.png", "bubble_F1_B2.png", "bubble_measured_vs_predicted.png"):
        (plots / name).write_bytes(PNG)
    theory = write_jsonl(tmp_path / "t.jsonl", rows())
    cpu = write_jsonl(tmp_path / "cpu.jsonl", [run_row("gpipe", 4, 8, 0.3, 0.31)])
    out, page = tmp_path / "out" / "REPORT.md", tmp_path / "out" / "REPORT.html"
    run = subprocess.run([sys.executable, str(SCRIPTS / "report.py"), str(theory), "--measured",
                          str(cpu), "--out", str(out), "--figures", str(plots), "--html",
                          str(page)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    md, html = out.read_text(), page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html
    # nothing loaded from elsewhere: no external src/href, no script, no stylesheet link
    assert not re.search(r'(src|href)="(?!data:|#)', html)
    assert "<script" not in html and "<link" not in html
    images = re.findall(r'<img src="([^"]*)"', html)
    assert len(images) == md.count("![") == 3
    assert all(src.startswith("data:image/png;base64,") for src in images)
    # every Markdown table is rendered, and every contents link has its heading
    assert html.count("<table>") == len(re.findall(r"^\|(---\|)+$", md, re.M)) > 5
    ids = set(re.findall(r'<h\d id="([^"]+)"', html))
    links = re.findall(r'<a href="#([^"]+)"', html)
    assert links and set(links) <= ids
