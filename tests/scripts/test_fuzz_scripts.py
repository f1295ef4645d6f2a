"""The fuzzing scripts' own checks: fuzz_cli.py's reading of an exit as a broken contract, its
reading of --help, and fuzz.sh's refusal of bad arguments (docs/testing.md, "Fuzzing")."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

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
