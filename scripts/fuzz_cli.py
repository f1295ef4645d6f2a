#!/usr/bin/env python3
"""Random command lines against the ppbench program: the CLI contract under inputs nobody wrote a
test for (docs/testing.md, "Fuzzing the command line").

Each command's options are read from its --help (name, type, allowed values). A case starts from
a small valid command line of that command and changes it: options added with values drawn from
the option's type and from a pool of bad values (empty, negative, huge, NaN, control characters,
paths that do not exist), options dropped, values replaced. Every case runs in a temporary
folder, so outputs land there. What must hold:

  - no signal, no exit code outside 0..3, never "internal error";
  - exit 2 or 3: nothing on stdout and exactly one line on stderr, "ppbench: error: ...", not
    CLI11's bare "Could not convert" (which says nothing of what is allowed);
  - no case runs past --timeout seconds (reported as slow, not failed: a valid large run may).

  scripts/fuzz_cli.py PPBENCH [--cases N] [--seed S] [--timeout SECONDS] [--command NAME ...]

Prints each finding with its command line, and a summary; exits 1 if any case broke the
contract, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile

from script_cli import InputError, OneLineParser, number, run

# Small valid command lines, so that a change reaches the checks past the flag parser.
BASE = {
    "list": [],
    "show": ["-s", "1f1b", "-d", "2", "-n", "4"],
    "simulate": ["-s", "1f1b", "-d", "4", "-n", "8"],
    "model": ["--workload", "mlp", "--layers", "4", "--width", "64"],
    "memory": ["--workload", "mlp", "--layers", "4", "--width", "64", "-s", "1f1b", "-d", "2",
               "-n", "4"],
    "tune": ["--workload", "mlp", "--layers", "4", "--width", "64", "-d", "2",
             "--memory-limit-bytes", "64M"],
    "run": ["--workload", "mlp", "--layers", "4", "--width", "64", "-s", "1f1b", "-d", "2", "-n",
            "4", "--steps", "1", "--warmup", "0"],
}

INTS = ["-1", "0", "1", "2", "3", "4", "5", "7", "8", "16", "64", "4096", "4097", "1048577",
        "2147483648", "9223372036854775808", "1e3", "0x10", "1.5", "", "abc", "-0"]
FLOATS = ["-1", "0", "1", "0.5", "2", "1e-300", "1e12", "1e13", "1e308", "1e309", "nan", "inf",
          "-inf", "", "abc", "1,2"]
TEXTS = ["", "x", "-", "\x1b[2J", "a" * 300, "/dev/null", "/nonexistent/dir/f", ".", "1,2,3",
         "0,0", "4,4", "F=1,B=2", "F=-1", "F=nan,B=1", "64G", "0", "1e3", "é", "rank 0: F0.0"]
FAMILIES = ["naive", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "interleaved-zb", "chimera",
            "zb-h1", "zb-h2", "zb-1p", "zb-v", "v-half", "dualpipe", "dualpipev", "nope"]
NAMED = {
    "--schedule": FAMILIES, "-s": FAMILIES,
    "--workload": ["mlp", "transformer", "amoebanet", "resnet"], "-w": ["mlp", "transformer"],
    "--preset": ["tiny-llama", "tiny-gpipe", "llama3-8b", "gpipe-transformer", "gpt9"],
    "--dtype": ["bf16", "f32", "f64", "f16"],
    "--partition": ["balanced", "uniform", "1,3", "2,2", "0,4", "4", "1,1,1,1,1,1,1,1,1"],
    "--backend": ["cpu", "cuda", "tpu"],
}

# "  -d,--devices,--pp INT:INT in [1, 4096]", "  --format TEXT:{text, json}  text or json",
# "  --check                     Also compute ...": the type, where there is one, follows the names
# after one space; a description follows after several.
OPTION = re.compile(r"^\s+((?:-\w,)?--[\w-]+(?:,--[\w-]+)*)(?: ([A-Z]+)(?=[: ]|$))?"
                    r"(?::(\{[^}]*\}|[A-Z]+))?")


def options_of(ppbench, command):
    """[(names, kind, choices)] of `ppbench COMMAND --help`, kind INT/UINT/FLOAT/TEXT/FLAG."""
    out = subprocess.run([ppbench, command, "--help"], capture_output=True, text=True, check=True)
    found = []
    for line in out.stdout.splitlines():
        m = OPTION.match(line)
        if not m or "--help" in m.group(1):
            continue
        names = m.group(1).split(",")
        kind = m.group(2) or "FLAG"
        choices = []
        if m.group(3) and m.group(3).startswith("{"):
            choices = [c.strip() for c in m.group(3)[1:-1].split(",")]
        found.append((names, kind, choices))
    return found


# Values an option of that type usually takes: half the draws, so that cases get past the first
# refusal and combine options.
GOOD = {"INT": ["1", "2", "4", "8"], "UINT": ["0", "7"], "FLOAT": ["0.5", "1", "2"]}


def value_for(rng, names, kind, choices, tmp):
    if kind in GOOD and rng.random() < 0.5:
        return rng.choice(GOOD[kind])
    pool = {"INT": INTS, "UINT": INTS, "FLOAT": FLOATS}.get(kind, TEXTS)
    for n in names:
        if n in NAMED and rng.random() < 0.6:
            return rng.choice(NAMED[n])
    if choices and rng.random() < 0.6:
        return rng.choice(choices)
    if kind == "TEXT" and rng.random() < 0.2:
        return os.path.join(tmp, rng.choice(["out.json", "out.jsonl", "sub/none.json", ""]))
    return rng.choice(pool)


def make_case(rng, command, options, tmp):
    argv = list(BASE[command])
    for _ in range(rng.randint(1, 4)):
        move = rng.random()
        if move < 0.6 and options:
            names, kind, choices = rng.choice(options)
            given = [i for i, a in enumerate(argv) if a in names]
            if given and kind != "FLAG" and given[0] + 1 < len(argv):
                # Already there: a new value, not a second copy (which CLI11 refuses at once).
                argv[given[0] + 1] = value_for(rng, names, kind, choices, tmp)
                continue
            argv.append(rng.choice(names))
            if kind != "FLAG":
                argv.append(value_for(rng, names, kind, choices, tmp))
        elif move < 0.8 and argv:
            del argv[rng.randrange(len(argv))]
        elif argv:
            argv[rng.randrange(len(argv))] = rng.choice(INTS + FLOATS + TEXTS)
    return [command] + argv


def broken(r):
    """Why the CompletedProcess `r` breaks the contract, or None."""
    if r.returncode < 0:
        return f"killed by signal {-r.returncode}"
    if r.returncode not in (0, 1, 2, 3):
        return f"exit code {r.returncode}"
    if "internal error" in r.stderr:
        return "internal error"
    if r.returncode in (2, 3):
        lines = r.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("ppbench: error: "):
            return f"exit {r.returncode} without exactly one 'ppbench: error:' line"
        if r.stdout:
            return f"exit {r.returncode} with output on stdout"
        if "Could not convert" in r.stderr:
            return "CLI11's bare conversion message, which names no allowed values"
    return None


def case_parser(prog: str, description: str, cases: int,
                timeout: float) -> argparse.ArgumentParser:
    """The arguments of a script of random cases (this one, explore_runs.py): the program, how
    many cases, the seed, and one case's time limit in seconds (at most a day)."""
    ap = OneLineParser(prog=prog, description=description)
    ap.add_argument("ppbench")
    ap.add_argument("--cases", type=number(int, 1), default=cases)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=number(float, 0, 86400, low_open=True), default=timeout)
    return ap


def program_of(a: argparse.Namespace) -> str:
    """The arguments' program as an absolute path; InputError where it is not an executable
    file."""
    ppbench = os.path.abspath(a.ppbench)
    if not os.path.isfile(ppbench) or not os.access(ppbench, os.X_OK):
        raise InputError(f"{a.ppbench}: not an executable program")
    return ppbench


def main(argv: list[str] | None = None) -> int:
    ap = case_parser("fuzz_cli", __doc__.splitlines()[0], cases=500, timeout=20)
    ap.add_argument("--command", nargs="+", default=sorted(BASE), choices=sorted(BASE))
    a = ap.parse_args(argv)
    ppbench = program_of(a)
    rng = random.Random(a.seed)
    options = {c: options_of(ppbench, c) for c in a.command}
    codes, findings, slow = {}, [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.cases):
            command = a.command[k % len(a.command)]
            argv = make_case(rng, command, options[command], tmp)
            try:
                r = subprocess.run([ppbench] + argv, capture_output=True, text=True,
                                   errors="replace", timeout=a.timeout, cwd=tmp,
                                   stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                slow.append(argv)
                continue
            codes[r.returncode] = codes.get(r.returncode, 0) + 1
            why = broken(r)
            if why:
                findings.append((why, argv, r.stderr.strip()[-400:]))
                print(f"BROKEN ({why}): ppbench {shlex.join(argv)}\n  {r.stderr.strip()[-400:]}",
                      flush=True)
    for argv in slow:
        print(f"slow (over {a.timeout:g} s): ppbench {shlex.join(argv)}")
    print(f"fuzz_cli: {a.cases} cases, seed {a.seed}: exit codes "
          f"{dict(sorted(codes.items()))}, {len(slow)} slow, {len(findings)} broke the contract")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(run("fuzz_cli", main))
