"""Text the sweep cannot pass on or print as it is: lone UTF-16 surrogates, NUL and other
control characters in a spec, a records file or a summary; integers too long to read; --only
values int() reads but that are not plain decimal digits. Each is one escaped line and exit 2
(or a record set aside), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import script_cli
import sweep
import sweep_spec
from conftest import SCRIPTS

SIM = {"schedule": "1f1b", "devices": 2, "microbatches": 4}
RUN = {"command": "run", "workload": "mlp", "workload_flags": "--layers 4 --width 64",
       "schedule": "1f1b", "devices": 2, "microbatches": 4, "steps": 1}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """sweep.py's bytes as they are: a raw ESC or a surrogate must be seen, not decoded away."""
    return subprocess.run([sys.executable, str(SCRIPTS / "sweep.py"), *args],
                          capture_output=True, check=False)


def refused(run: subprocess.CompletedProcess, *wanted: str) -> str:
    """The one stderr line of a refusal (exit 2), checked to be harmless and to hold wanted."""
    assert run.returncode == 2, run.stderr
    assert b"Traceback" not in run.stderr
    assert all(b >= 0x20 or b == 0x0A for b in run.stderr), run.stderr
    line = run.stderr.decode("utf-8")
    assert line.count("\n") == 1, line
    for text in wanted:
        assert text in line, line
    return line


def raw_spec(path: Path, text: str) -> Path:
    """A spec written as the text given (JSON escapes such as \\ud800 kept as they are)."""
    path.write_text(text, encoding="ascii")
    return path


# --- 1, 2: a spec string with a surrogate or a control character ---------------------------

@pytest.mark.parametrize("top, group, key, shown", [
    ('"name": "\\ud800", ', {}, '"name"', "\\ud800"),
    ("", {"name": "\ud800"}, '"name"', "\\ud800"),
    ("", {**RUN, "workload": "\ud800"}, '"workload"', "\\ud800"),
    ("", {**RUN, "workload_flags": "--seq \ud800"}, '"workload_flags"', "\\ud800"),
    ("", {**RUN, "workload": "ml\x00p"}, '"workload"', "\\u0000"),
    ("", {**RUN, "workload_flags": "--seq\x00 64"}, '"workload_flags"', "\\u0000"),
    ("", {**RUN, "workload": "ml\x1bp"}, '"workload"', "\\u001b"),
    ("", {**SIM, "cost": ["F=1,B=2", "F=1\x07"]}, '"cost"', "\\u0007"),
    ("", {**SIM, "name": "a\x1b[31mb"}, '"name"', "\\u001b"),
    ('"description": "\\udc80", ', {}, '"description"', "\\udc80"),
])
def test_a_spec_string_with_a_surrogate_or_control_character_is_refused(tmp_path, top, group,
                                                                        key, shown):
    runs = json.dumps([{**SIM, **group}])  # ensure_ascii: the surrogate stays an escape
    spec = raw_spec(tmp_path / "s.json", f'{{{top}"runs": {runs}}}')
    line = refused(run_cli(str(spec), "--out", str(tmp_path / "p"), "--ppbench", sys.executable),
                   f"key {key}", shown, "allowed:")
    assert not (tmp_path / "p.summary.json").exists() and not (tmp_path / "p.jsonl").exists()
    assert "surrogate" in line or "control character" in line


def test_a_description_may_hold_line_breaks(tmp_path):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"description": "two\nlines\tand a tab", "runs": [SIM]}))
    _, points = sweep_spec.load_spec(spec)
    assert len(points) == 1


def test_a_schema_error_of_a_group_whose_name_holds_esc_prints_no_esc(tmp_path):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"runs": [{**SIM, "name": "a\x1bb", "schedule": "nope"}]}))
    refused(run_cli(str(spec), "--out", str(tmp_path / "p")), "runs[0]")


# --- 1: a records line with a surrogate, a summary with one ---------------------------------

def test_a_records_line_with_a_surrogate_is_set_aside(tmp_path, fake_ppbench, capsys):
    binary, _ = fake_ppbench
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"name": "t", "runs": [SIM]}))
    sweep.run_sweep(spec, binary, tmp_path / "p")
    records = tmp_path / "p.jsonl"
    row = json.loads(records.read_text().splitlines()[0])
    bad = json.dumps({**row, "point": {**row["point"], "schedule": "\ud800"}})
    assert "\\ud800" in bad
    with records.open("a") as f:
        f.write(bad + "\n")
    capsys.readouterr()
    counts = sweep.run_sweep(spec, binary, tmp_path / "p")
    err = capsys.readouterr().err
    assert counts["skipped"] == 1
    assert "p.jsonl:2: " in err and "\\ud800" in err and "set aside" in err, err
    assert bad in (tmp_path / "p.previous.jsonl").read_text()
    assert len(records.read_text().splitlines()) == 1
    assert "1f1b" in (tmp_path / "p.csv").read_text()


def test_summarize_prints_a_surrogate_or_esc_of_a_summary_escaped(tmp_path):
    (tmp_path / "a.summary.json").write_text('{"sweep": "\\ud800", "points": 1, "ok": 1}')
    (tmp_path / "b.summary.json").write_text('{"sweep": "x\\u001b[2Jy", "points": 1}')
    run = run_cli("--summarize", str(tmp_path / "a"), str(tmp_path / "b"))
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr
    out = run.stdout.decode("utf-8")
    assert "  \\ud800: 1 points" in out and "  x\\x1b[2Jy: 1 points" in out
    assert "\x1b" not in out


# --- 3: the one line itself ------------------------------------------------------------------

def test_say_escapes_control_characters_and_surrogates(capsys):
    script_cli.say("tool", "a\x1b[31mb \ud800 c\u202ed\nnext\x00")
    err = capsys.readouterr().err
    assert err == "tool: a\\x1b[31mb \\ud800 c\\u202ed next\\x00\n"


def test_the_top_level_type_error_names_the_whole_first_sentence(tmp_path):
    spec = tmp_path / "s.json"
    spec.write_text("null")
    refused(run_cli(str(spec), "--out", str(tmp_path / "p")),
            "allowed: A parameter sweep of `ppbench simulate` or `ppbench run`, read by "
            "scripts/sweep.py (docs/bench.md)\n")


def test_an_integer_of_5000_digits_is_named_by_its_length(tmp_path):
    spec = raw_spec(tmp_path / "s.json",
                    '{"runs": [{"schedule": "1f1b", "devices": ' + "1" * 5000 +
                    ', "microbatches": 4}]}')
    line = refused(run_cli(str(spec), "--out", str(tmp_path / "p")), "5000 digits",
                   "allowed: at most")
    assert "set_int_max_str_digits" not in line


@pytest.mark.parametrize("value", ["0_2", " 2", "²", "٢", "+2", "1" * 5000])
def test_only_takes_plain_decimal_digits(tmp_path, value):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"runs": [{**SIM, "devices": [1, 2]}]}))
    line = refused(run_cli(str(spec), "--out", str(tmp_path / "p"),
                           "--only", f"devices={value}"), "allowed:")
    assert "set_int_max_str_digits" not in line
    if len(value) < 100:
        assert script_cli.shown(value) in line
