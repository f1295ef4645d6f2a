#!/usr/bin/env python3
"""Random command lines against the ppbench program: the CLI contract under inputs nobody wrote a
test for (docs/testing.md, "Fuzzing the command line").

Each command's options are read from its --help (name, type, allowed values). A case starts from
one of a few small valid command lines of that command. Half the cases change one thing only (an
option added or given a new value, or one argument dropped), so that most of them get past the
argument checks; the rest change two to four things. A change is meant to pass (60%: an option
that fits the command line, with a value it usually takes, and what it needs, such as zb-1p for
--memory-limit) or not (any option, a value from a pool of bad ones: empty, negative, huge, NaN,
control characters; a word dropped or replaced).
File options read files written for the run: schedule files in both forms and device profiles,
sound and malformed (wrong types, 1e400, deep nesting, a stray byte), and /dev/zero, a FIFO, a
folder, a path that does not exist; outputs go to a fresh file, "-", /dev/full or a folder. At
most one value of a case is large (above 256), so that a case stays small. Each case runs in a
temporary folder (--keep DIR: in DIR, kept) with its address space capped (--memory-cap GiB).
What must hold:

  - no signal, no exit code outside 0..3, never "internal error", no escape byte on stderr;
  - exit 0: something on stdout; with --format json or an output to "-", stdout is JSON (no NaN);
    an output to a fresh file is there and is JSON (--results: one object a line);
  - exit 1 only for a failure the command line asked for: --check past a --check-tolerance it
    gave, a rank waiting past a --watchdog it gave. A failed --check at the dtype's own tolerance
    is a finding (every schedule must compute the single-device step), as is a step that failed;
  - an input that is not a regular file (/dev/zero, a FIFO, a folder) is refused: exit 2;
  - exit 1, 2 or 3: one line on stderr (besides --progress's), "ppbench: error: ...", not CLI11's
    bare "Could not convert"; exit 2 also nothing on stdout and no fresh output file (exit 1 and
    3 may come after the report: a failed check, an output that could not be written). Under
    the cap, exit 3 "out of memory" is the machine's answer, not a finding;
  - no case runs past its command's time limit (TIMEOUTS, or --timeout for all): a hang is a
    finding.

  scripts/fuzz_cli.py PPBENCH [--cases N] [--seed S] [--timeout SECONDS] [--memory-cap GIB]
                      [--command NAME ...] [--keep DIR]

Prints each finding with its command line, and a summary; exits 1 if any case broke the
contract, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Iterator

from script_cli import InputError, OneLineParser, number, run

# Small valid command lines, so that a change reaches the checks past the flag parser. "{name}"
# is a sound input file written for the run (write_inputs).
MLP = ["--workload", "mlp", "--layers", "4", "--width", "64"]
LLAMA = ["--workload", "transformer", "--preset", "tiny-llama", "--layers", "2", "--seq", "8"]
BASES = {
    "list": [[], ["--format", "json"]],
    "show": [["-s", "1f1b", "-d", "2", "-n", "4"],
             ["-s", "interleaved-1f1b", "-d", "2", "-n", "4", "-v", "2", "--format", "grid"],
             ["--schedule-file", "{schedule}"], ["--schedule-file", "{schedule_csv}"]],
    "simulate": [["-s", "1f1b", "-d", "4", "-n", "8"],
                 ["-s", "zb-h1", "-d", "2", "-n", "4", *MLP, "--format", "json"],
                 ["--schedule-file", "{schedule}", "--cost", "F=1,B=2"],
                 ["-s", "1f1b", "-d", "2", "-n", "4", *MLP, "--device-profile", "{profile}"],
                 ["-s", "1f1b", "-d", "2", "-n", "4", *MLP, "--device-profile", "{measured}"]],
    "model": [MLP, [*LLAMA, "--stages", "2", "--format", "json"]],
    "memory": [[*MLP, "-s", "1f1b", "-d", "2", "-n", "4"],
               [*LLAMA, "-s", "zb-v", "-d", "2", "-n", "4", "--format", "json"]],
    "tune": [[*MLP, "-d", "2", "--memory-limit-bytes", "64M"],
             [*MLP, "-d", "2", "--memory-limit-bytes", "64M", "--device-profile", "{profile}"]],
    "run": [[*MLP, "-s", "1f1b", "-d", "2", "-n", "4", "--steps", "1", "--warmup", "0"],
            [*LLAMA, "-s", "zb-h1", "-d", "2", "-n", "4", "--format", "json"],
            [*MLP, "--schedule-file", "{schedule}", "--check"],
            [*MLP, "-s", "interleaved-1f1b", "-d", "2", "-n", "4", "--dtype", "f64", "--check",
             "--format", "json"]],
}

# Seconds a case of each command may take. Every base above runs in well under a second and at
# most one value of a case is large; the slowest cases seen on 2 cores took 31 s (`model
# --layers 1048577 --format json`, 12 s under the cap), 12 s (`tune --layers 1048577`) and 11 s
# (`run --check --warmup 4096`). A case past its limit hangs (a file read forever, a deadlock
# the validator missed) or does far more work than asked: either is a finding.
TIMEOUTS = {"list": 10, "show": 30, "model": 60, "memory": 30, "simulate": 60, "tune": 90,
            "run": 90}

INTS = ["-1", "0", "1", "2", "3", "4", "5", "7", "8", "16", "64", "4096", "4097", "1048577",
        "16777217", "2147483648", "9223372036854775808", "1e3", "0x10", "1.5", "", "abc", "-0"]
FLOATS = ["-1", "0", "1", "0.5", "2", "1e-300", "1e12", "1e13", "1e308", "1e309", "nan", "inf",
          "-inf", "", "abc", "1,2"]
TEXTS = ["", "x", "-", "\x1b[2J", "a" * 300, "/dev/null", "/nonexistent/dir/f", ".", "1,2,3",
         "0,0", "4,4", "F=1,B=2", "F=-1", "F=nan,B=1", "64G", "0", "1e3", "é", "rank 0: F0.0"]
FAMILIES = ["naive", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "interleaved-zb", "chimera",
            "chimera-doubling", "zb-h1", "zb-h2", "zb-1p", "zb-2p", "zb-v", "v-half", "v-min",
            "dualpipe", "dualpipev", "nope"]
# Values an option usually takes, by its long name; an option not named here takes its choices
# or GOOD_KIND's.
GOOD = {
    "--schedule": FAMILIES[:-1], "--workload": ["mlp", "transformer", "amoebanet"],
    "--preset": ["tiny-llama", "tiny-gpipe"], "--dtype": ["f32", "f64", "bf16"],
    "--partition": ["balanced", "uniform", "1,3", "2,2", "1,1,1,1"],
    "--devices": ["1", "2", "3", "4"], "--microbatches": ["1", "2", "4", "8"],
    "--chunks": ["1", "2", "3"], "--group-size": ["2", "4"], "--layers": ["2", "3", "4", "6"],
    "--width": ["8", "16", "64"], "--input-dim": ["8", "32"], "--classes": ["2", "10"],
    "--filters": ["8", "16"], "--image-size": ["32", "64"], "--hidden": ["16", "32", "64"],
    "--ffn": ["24", "64"], "--heads": ["2", "4"], "--kv-heads": ["1", "2"],
    "--vocab": ["32", "256"], "--seq": ["4", "16"], "--microbatch-size": ["1", "2", "3"],
    "--steps": ["1", "2"], "--warmup": ["0", "1"], "--seed": ["0", "7", "18446744073709551615"],
    "--watchdog": ["30", "60"], "--channel-capacity": ["1", "2", "4", "8"],
    "--memory-limit": ["1", "1.5", "2", "4"], "--w-memory": ["0", "0.5", "1"],
    "--cost": ["F=1,B=2", "F=1,I=1,W=1", "B=2", "F=1,B=2,FB=2.5"], "--comm": ["0", "0.25"],
    "--max-memory": ["64K", "16M", "1G"], "--memory-limit-bytes": ["64K", "1M", "64M"],
    "--optimizer": ["none", "sgd", "adamw"], "--lr": ["1e-3", "0.1", "1"],
    "--weight-decay": ["0", "0.1"], "--check-tolerance": ["1e-10", "1e-4", "0.5"],
    "--dp": ["1", "2"], "--dp-bandwidth": ["1", "25"], "--dp-latency": ["0", "10"],
    "--grad-units": ["0", "1", "3"], "--cores": ["1", "2", "3"], "--eager-limit": ["0", "64K"],
    "--global-batch": ["4", "8", "16"], "--top": ["1", "3"], "--stages": ["1", "2", "4"],
    "--gpus": ["0", "0,1"], "--virtual-devices": ["2"], "--sms-per-device": ["8"],
    "--link-bandwidth": ["10"], "--link-latency": ["1"], "--backend": ["cpu"],
}
GOOD_KIND = {"INT": ["1", "2", "4", "8"], "UINT": ["0", "7"], "FLOAT": ["0.5", "1", "2"]}
BAD = {"--schedule": ["nope", "", "1F1B", "zb"], "--workload": ["resnet", "MLP", ""],
       "--preset": ["llama3-8b", "gpt9"], "--dtype": ["f16", "F32", ""],
       "--partition": ["0,4", "4", "1,1,1,1,1,1,1,1,1", "-1,5", "2,2,", "a,b"],
       "--backend": ["cuda", "tpu"]}
# Options that apply to one workload only, or to the CUDA backend or mpirun only: a change that
# is meant to pass leaves them out where the case's command line does not fit them.
ONLY_FOR = {
    "mlp": {"--width", "--input-dim"}, "amoebanet": {"--filters", "--image-size"},
    "transformer": {"--preset", "--hidden", "--ffn", "--heads", "--kv-heads", "--vocab", "--seq"},
}
NOT_PASSING = {"--workload", "--gpus", "--virtual-devices", "--sms-per-device",
               "--link-bandwidth", "--link-latency", "--cuda-graph", "--profile-statistic"}
SCHEDULE_FLAGS = {"--schedule", "--devices", "--microbatches", "--chunks", "--group-size"}
# simulate's options that go with --workload only, and those that go without it only.
WITH_WORKLOAD = {"--preset", "--layers", "--width", "--input-dim", "--classes", "--filters",
                 "--image-size", "--hidden", "--ffn", "--heads", "--kv-heads", "--vocab", "--seq",
                 "--microbatch-size", "--dtype", "--partition", "--device-profile",
                 "--memory-limit-bytes", "--dp-bandwidth", "--dp-latency", "--eager-limit"}
WITHOUT_WORKLOAD = {"--cost", "--comm", "--grad-units"}
# What a change meant to pass sets along with the option: {option: {companion: its values}}.
CHUNKED = ["interleaved-1f1b", "looped-bfs", "interleaved-zb"]
NEEDS = {"--memory-limit": {"--schedule": ["zb-1p", "zb-2p"]},
         "--w-memory": {"--schedule": ["zb-1p", "zb-2p"]},
         "--group-size": {"--schedule": ["interleaved-1f1b"]},
         "--chunks": {"--schedule": CHUNKED},
         "--dp-overlap": {"--dp": ["2"]}, "--dp-bandwidth": {"--dp": ["2"]},
         "--dp-latency": {"--dp": ["2"]}, "--grad-units": {"--dp": ["2"]},
         "--check-tolerance": {"--check": []}}
LARGE = 256  # a value above this is large: at most one a case
INPUTS = ("--schedule-file", "--device-profile")
OUTPUTS = ("--trace-out", "--results", "--profile-out")
PROGRESS = re.compile(r"step \d+/\d+")


def write_inputs(folder: str) -> SimpleNamespace:
    """Writes the input files into `folder`: sound and malformed schedule files (ppbench's text
    form and PyTorch's CSV, docs/schedules.md "Your own schedule") and device profiles, a FIFO
    and a subfolder. Returns their paths: .base (the sound ones BASES names), .schedules and
    .profiles (name -> path), .fifo, .folder and .file (a regular file to put a path under)."""
    rates = {"format": "ppbench-device-profile", "version": 1, "kind": "rates",
             "peak_flops": 1e12, "memory_bandwidth": 1e11, "link_bandwidth": 1e10,
             "link_latency": 5e-6}
    stage = {"F": 0.002, "B": 0.003, "I": 0.0015, "W": 0.0015, "FB": 0.005, "comm": 1e-5}
    measured = {"format": "ppbench-device-profile", "version": 1, "kind": "measured",
                "granularity": "stage", "time_unit": "s", "dtype": "f32", "workload": "mlp",
                "workload_config": {"layers": 4, "width": 64, "input_dim": 64, "classes": 10},
                "microbatch_size": 1, "layer_counts": [2, 2],
                "stages": [stage, dict(stage, comm=0.0)]}
    deep = 100000
    profiles = {
        "ok-rates.json": json.dumps(rates),
        "ok-measured.json": json.dumps(measured),
        "overflow-1e400.json": json.dumps(rates).replace("1000000000000.0", "1e400"),
        "overflow-int.json": json.dumps(rates).replace("1000000000000.0", "1" + "0" * 400),
        "underflow.json": json.dumps(rates).replace("5e-06", "1e-400"),
        "negative.json": json.dumps(dict(rates, memory_bandwidth=-1)),
        "zero.json": json.dumps(dict(rates, peak_flops=0)),
        "huge.json": json.dumps(dict(rates, peak_flops=1.7e308, link_latency=1.7e308)),
        "string-rate.json": json.dumps(dict(rates, link_bandwidth="fast")),
        "null-rate.json": json.dumps(dict(rates, peak_flops=None)),
        "bool-rate.json": json.dumps(dict(rates, peak_flops=True)),
        "list-rate.json": json.dumps(dict(rates, peak_flops=[1e12])),
        "object-rate.json": json.dumps(dict(rates, peak_flops={"value": 1e12})),
        "no-rates.json": json.dumps({"format": "ppbench-device-profile", "version": 1,
                                     "kind": "rates"}),
        "version-string.json": json.dumps(dict(rates, version="1")),
        "version-2.json": json.dumps(dict(rates, version=2)),
        "version-float.json": json.dumps(dict(rates, version=1.5)),
        "kind-number.json": json.dumps(dict(rates, kind=5)),
        "kind-unknown.json": json.dumps(dict(rates, kind="guessed")),
        "nan.json": json.dumps(rates).replace("1000000000000.0", "NaN"),
        "stages-string.json": json.dumps(dict(measured, stages="x")),
        "stages-empty.json": json.dumps(dict(measured, stages=[], layer_counts=[])),
        "stages-nested.json": json.dumps(dict(measured, stages=[[1], [2]])),
        "stage-string.json": json.dumps(dict(measured, stages=[dict(stage, F="1"), stage])),
        "stage-huge.json": json.dumps(dict(measured, stages=[dict(stage, F=1e308), stage])),
        "stage-negative.json": json.dumps(dict(measured, stages=[dict(stage, W=-1), stage])),
        "counts-huge.json": json.dumps(dict(measured, layer_counts=[2, 2 ** 62])),
        "counts-negative.json": json.dumps(dict(measured, layer_counts=[-1, 5])),
        "counts-float.json": json.dumps(dict(measured, layer_counts=[1.5, 2.5])),
        "microbatch-huge.json": json.dumps(measured).replace('"microbatch_size": 1',
                                                             '"microbatch_size": 1e400'),
        "duplicate-keys.json": json.dumps(rates)[:-1] + ', "peak_flops": -5}',
        "deep-array.json": "[" * deep + "]" * deep,
        "deep-object.json": '{"a":' * deep + "1" + "}" * deep,
        "deep-in-rates.json": json.dumps(rates)[:-1] + ', "extra": ' + "[" * deep + "]" * deep
        + "}",
        "top-array.json": "[]", "top-null.json": "null", "top-number.json": "1e400",
        "empty.json": "", "truncated.json": json.dumps(measured)[:120],
        "bom.json": "\ufeff" + json.dumps(rates),
        "stray-byte.json": b"\x00\xff".join([json.dumps(rates)[:20].encode(),
                                             json.dumps(rates)[20:].encode()]),
        "long-string.json": json.dumps(dict(rates, name="n" * 1_000_000)),
    }
    schedules = {
        "ok-1f1b-2x2.txt": "rank 0: F0.0 F0.1 B0.0 B0.1\nrank 1: F1.0 B1.0 F1.1 B1.1\n",
        "ok-gpipe-2x2.csv": "0F0,0F1,0B1,0B0\n1F0,1F1,1B1,1B0\n",
        "ok-bom-crlf.csv": "\ufeff0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n",
        "ok-interleaved.txt": "# placement: interleaved v=2\n"
                              "rank 0: F0.0 F0.1 F2.0 F2.1 B2.0 B2.1 B0.0 B0.1\n"
                              "rank 1: F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 B1.0 B1.1\n",
        "ok-zb-split.txt": "rank 0: F0.0 F0.1 I0.0 I0.1 W0.0 W0.1\n"
                           "rank 1: F1.0 I1.0 F1.1 I1.1 W1.1 W1.0\n",
        "empty.txt": "", "comments.txt": "# only a comment\n\n   \n",
        "bad-token.txt": "rank 0: F0.0 X0.1 B0.0\n",
        "no-colon.txt": "rank 0 F0.0 B0.0\n",
        "rank-gap.txt": "rank 1: F0.0 B0.0\n",
        "rank-huge.txt": "rank 99999999999999999999: F0.0 B0.0\n",
        "mb-huge.txt": "rank 0: F0.1048576 B0.1048576\n",
        "stage-huge.txt": "rank 0: F4194304.0 B4194304.0\n",
        "number-overflow.txt": "rank 0: F99999999999999999999.0 B0.0\n",
        "negative.txt": "rank 0: F-1.0 B-1.0\n",
        "i-without-w.txt": "rank 0: F0.0 I0.0\n",
        "w-before-i.txt": "rank 0: F0.0 W0.0 I0.0\n",
        "deadlock.txt": "rank 0: B0.0 F0.0\nrank 1: F1.0 B1.0\n",
        "placement-v0.txt": "# placement: interleaved v=0\nrank 0: F0.0 B0.0\n",
        "placement-huge.txt": "# placement: interleaved v=99999999999\nrank 0: F0.0 B0.0\n",
        "placement-unknown.txt": "# placement: spiral\nrank 0: F0.0 B0.0\n",
        "stage-ranks-bad.txt": "# placement: stage-ranks 0,7\nrank 0: F0.0 B0.0\n",
        "duplicates.txt": "rank 0: " + "F0.0 " * 50000 + "B0.0\n",
        "many-ranks.txt": "".join(f"rank {r}: F{r}.0 B{r}.0\n" for r in range(4097)),
        "long-token.txt": "rank 0: F" + "0" * 1_000_000 + ".0 B0.0\n",
        "binary.txt": b"rank 0: F0.0\x00\xff B0.0\n",
        "control.txt": "rank 0: F0.0 \x1b[2J B0.0\n",
        "bad-cell.csv": "0X0,0F0\n",
        "half-pair.csv": "(0F1;3B0\n",
        "pair-same.csv": "(0F0;0B0)OVERLAP_F_B\n",
        "empty-cells.csv": ",,,,\n,,\n",
        "huge.csv": "4095F1048575\n",
        "comm-only.csv": "0SEND_F0,0RECV_F0\n",
        "stage-gap.csv": "0F0,0B0\n2F0,2B0\n",
        "stage-twice.csv": "0F0,0B0\n0F1,0B1\n",
        "blank-rows.csv": "\n\n0F0,0B0\n\n\n",
    }
    paths = SimpleNamespace(schedules={}, profiles={})
    for table, files in ((paths.schedules, schedules), (paths.profiles, profiles)):
        for name, text in files.items():
            path = os.path.join(folder, name)
            with open(path, "wb") as f:
                f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
            table[name] = path
    paths.fifo = os.path.join(folder, "fifo")
    os.mkfifo(paths.fifo)
    paths.folder = os.path.join(folder, "folder")
    os.mkdir(paths.folder)
    paths.file = paths.profiles["ok-rates.json"]
    paths.base = {"schedule": paths.schedules["ok-1f1b-2x2.txt"],
                  "schedule_csv": paths.schedules["ok-gpipe-2x2.csv"],
                  "profile": paths.profiles["ok-rates.json"],
                  "measured": paths.profiles["ok-measured.json"]}
    return paths


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


def long_name(names: list[str]) -> str:
    return next((n for n in names if n.startswith("--")), names[0])


def is_large(value: str) -> bool:
    """A number above LARGE (inf included): a size that may make a case slow."""
    try:
        return abs(float(value)) > LARGE
    except ValueError:
        return False


def value_for(rng, names, kind, choices, files, good: bool):
    """A value for the option: one it usually takes where `good`, else one from the bad pools.
    `files`: write_inputs's paths, with .tmp (the case folder) and .fresh (a counter)."""
    name = long_name(names)
    if name in OUTPUTS:
        if good or rng.random() < 0.3:
            files.fresh += 1
            return rng.choice([os.path.join(files.tmp, f"out{files.fresh}.json"),
                               f"rel{files.fresh}.json", "-", "/dev/null"])
        return rng.choice(["/dev/full", files.folder, os.path.join(files.file, "below"),
                           os.path.join(files.tmp, "none", "out.json"), ""])
    if name in INPUTS:
        table = files.schedules if name == "--schedule-file" else files.profiles
        if good:
            return rng.choice([p for n, p in sorted(table.items()) if n.startswith("ok-")])
        if rng.random() < 0.8:
            return rng.choice(sorted(table.values()))
        return rng.choice(["/dev/zero", files.fifo, files.folder, "/nonexistent/f", "/dev/null",
                           "", os.path.join(files.file, "below")])
    if good:
        pool = GOOD.get(name) or choices or GOOD_KIND.get(kind)
        if pool:
            return rng.choice(pool)
    if name in BAD and rng.random() < 0.5:
        return rng.choice(BAD[name])
    if choices and rng.random() < 0.3:
        return rng.choice(choices)
    return rng.choice({"INT": INTS, "UINT": INTS, "FLOAT": FLOATS}.get(kind, TEXTS))


def fits(names, command, argv) -> bool:
    """Whether a change meant to pass may set this option on this command line."""
    name = long_name(names)
    workload = value_of(argv, "--workload", aliases=True)
    if name in NOT_PASSING or (command == "run" and name in ("--dp", "--dp-overlap")):
        return False
    if any(name in only and workload != w for w, only in ONLY_FOR.items()) or \
            (name == "--classes" and workload == "transformer"):
        return False
    if "--schedule" in NEEDS.get(name, {}) and "--schedule-file" in argv:
        return False
    if command == "simulate" and name in (WITH_WORKLOAD if workload is None
                                          else WITHOUT_WORKLOAD):
        return False
    if command == "model" and name == "--partition" and \
            value_of(argv, "--stages", aliases=True) is None:
        return False
    if name == "--chunks" and "--schedule-file" in argv:
        return False
    return not (name in SCHEDULE_FLAGS and "--schedule-file" in argv)


def drop_option(argv, names):
    """Removes the option (one of `names`) and its value from argv, in place."""
    for i in reversed([i for i, a in enumerate(argv) if a in names]):
        del argv[i:i + 2]


def set_option(argv, names, value=None):
    """Gives the option (one of `names`) `value` in argv, in place: a new value where it is
    there (not a second copy, which CLI11 refuses at once), else added; a flag (value None) is
    added where it is missing."""
    given = [i for i, a in enumerate(argv) if a in names]
    if value is None:
        if not given:
            argv.append(names[-1])
    elif given and given[0] + 1 < len(argv):
        argv[given[0] + 1] = value
    else:
        argv += [names[-1], value]


def make_case(rng, command, options, files):
    """The argv (after the program) of one case of `command`: one of its BASES with one change
    (half the cases) or two to four (see `change`)."""
    argv = [a.format(**files.base) if a.startswith("{") else a
            for a in rng.choice(BASES[command])]
    large = False
    for _ in range(1 if rng.random() < 0.5 else rng.randint(2, 4)):
        large = change(rng, command, argv, options, files, rng.random() < 0.6, large)
    return [command] + argv


def change(rng, command, argv, options, files, good: bool, large: bool) -> bool:
    """Changes argv in place: where `good`, an option that fits the command line is set to a
    value it usually takes, with what it needs (zb-1p for --memory-limit); else any option gets
    any value (a third of the time one of the files), or an option or a word is dropped, or a
    word replaced. `large`: whether argv holds a large value already, then no other is drawn.
    Returns whether argv holds one now."""
    move = 0.0 if good else rng.random()
    if move < 0.7 and options:
        fitting = [o for o in options if not good or fits(o[0], command, argv)]
        if not good and rng.random() < 0.3:
            # the files: read and written, sound and malformed
            fitting = [o for o in options if long_name(o[0]) in INPUTS + OUTPUTS]
        names, kind, choices = rng.choice(fitting or options)
        value = None
        if kind != "FLAG":
            value = value_for(rng, names, kind, choices, files, good)
            if large and is_large(value):
                value = value_for(rng, names, kind, choices, files, good=True)
                value = "1" if is_large(value) else value
            large = large or is_large(value)
        if long_name(names) == "--schedule-file":
            # the file names D and N: a family's flags would only be refused
            for flag in SCHEDULE_FLAGS:
                drop_option(argv, ALIASES.get(flag, [flag]))
        set_option(argv, names, value)
        for companion, values in NEEDS.get(long_name(names), {}).items() if good else ():
            if not values or value_of(argv, companion, aliases=True) not in values:
                set_option(argv, ALIASES.get(companion, [companion]),
                           rng.choice(values) if values else None)
    elif move < 0.85 and argv:
        # an option with its value, or (a third of the time) any one word
        i = rng.randrange(len(argv))
        if argv[i].startswith("-") and i + 1 < len(argv) and \
                not argv[i + 1].startswith("-") and rng.random() < 0.67:
            del argv[i + 1]
        del argv[i]
    elif argv:
        value = rng.choice(INTS + FLOATS + TEXTS)
        if large and is_large(value):
            value = "2"
        large = large or is_large(value)
        argv[rng.randrange(len(argv))] = value
    return large


ALIASES = {"--schedule": ["-s", "--schedule"], "--devices": ["-d", "--pp", "--devices"],
           "--microbatches": ["-n", "--microbatches"], "--chunks": ["-v", "--chunks"],
           "--workload": ["-w", "--workload"], "--stages": ["-S", "--stages"],
           "--microbatch-size": ["-b", "--microbatch-size"]}


def value_of(argv, name, aliases=False):
    """The value after the last `name` in argv (with `aliases`, or any of its other names), or
    None."""
    names = ALIASES.get(name, [name]) if aliases else [name]
    at = [i for i, a in enumerate(argv) if a in names]
    return argv[at[-1] + 1] if at and at[-1] + 1 < len(argv) else None


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, which are not JSON."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def json_broken(text: str, lines: bool = False) -> str | None:
    """Why `text` is not JSON (with `lines`: not one JSON value a line), or None."""
    try:
        if lines:
            if not text.strip():
                return "no line"
            for line in text.splitlines():
                if line.strip():
                    strict_json(line)
        else:
            strict_json(text)
    except (ValueError, RecursionError) as e:
        return str(e)[:120]
    return None


def step_failure(line: str, argv) -> str | None:
    """Why an exit 1 with this one line breaks the contract for a case of `argv`, or None where
    the command line asked for it."""
    if line.startswith("ppbench: error: --check failed"):
        if "--check-tolerance" in argv:
            return None
        return "a failed --check at the default tolerance (the step is not the single device's)"
    if line.startswith("ppbench: error: ") and "watchdog: " in line:
        return None if "--watchdog" in argv else "a step stalled past the default watchdog"
    return "exit 1: a step failed"


def broken(r, argv=(), fresh=None):
    """Why the CompletedProcess `r` of a case of `argv` breaks the contract, or None. `fresh`:
    {output option: its path} of the case's outputs that did not exist before it ran."""
    fresh = fresh or {}
    code = r.returncode
    if code < 0:
        return f"killed by signal {-code}"
    if code not in (0, 1, 2, 3):
        return f"exit code {code}"
    if "internal error" in r.stderr:
        return "internal error"
    if "\x1b" in r.stderr:
        return "an escape byte on stderr"
    for option in INPUTS:
        path = value_of(argv, option)
        if code != 2 and path is not None and not os.path.isfile(path):
            # /dev/zero, a FIFO, a folder: refused by name, not read until memory or time ends
            return f"{option} {path}: not a regular file, yet exit {code}"
    if code == 0:
        return output_broken(r.stdout, argv, fresh)
    lines = r.stderr.strip().splitlines()
    if "--progress" in argv:
        lines = [line for line in lines if not PROGRESS.match(line)]
    if len(lines) != 1 or not lines[0].startswith("ppbench: error: "):
        return f"exit {code} without exactly one 'ppbench: error:' line"
    if "Could not convert" in lines[0]:
        return "CLI11's bare conversion message, which names no allowed values"
    if code == 1:
        return step_failure(lines[0], argv)
    if code == 2 and r.stdout:
        return "exit 2 with output on stdout"
    if code == 2 and any(os.path.exists(p) for p in fresh.values()):
        return "exit 2 with an output file written"
    return None


def output_broken(stdout: str, argv, fresh) -> str | None:
    """Why the outputs of a case that exited 0 break the contract, or None."""
    if not stdout:
        return "exit 0 with nothing on stdout"
    to_stdout = [o for o in OUTPUTS if value_of(argv, o) == "-"]
    if to_stdout or value_of(argv, "--format") == "json":
        why = json_broken(stdout, lines=to_stdout == ["--results"])
        if why:
            return f"exit 0, and stdout is not JSON ({why})"
    for option, path in fresh.items():
        if not os.path.isfile(path):
            return f"exit 0 without the {option} file"
        with open(path, encoding="utf-8", errors="replace") as f:
            why = json_broken(f.read(), lines=option == "--results")
        if why:
            return f"exit 0, and the {option} file is not JSON ({why})"
    return None


def address_space(limit_bytes: int):
    """A subprocess preexec_fn capping the child's address space, so that an estimate short of
    the truth is a bad_alloc (exit 3), not the host's memory (as tests/cli/cli_checks.py)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return limit


def run_case(ppbench, argv, timeout, tmp, cap_bytes):
    """(CompletedProcess or None past `timeout`, seconds, {output option: path} of the outputs
    that do not exist yet) of one case."""
    fresh = {}
    for option in OUTPUTS:
        path = value_of(argv, option)
        if path and path != "-" and not os.path.lexists(os.path.join(tmp, path)):
            fresh[option] = os.path.join(tmp, path)
    start = time.monotonic()
    try:
        r = subprocess.run([ppbench] + argv, capture_output=True, text=True, errors="replace",
                           timeout=timeout, cwd=tmp, stdin=subprocess.DEVNULL,
                           preexec_fn=address_space(cap_bytes))
    except subprocess.TimeoutExpired:
        r = None
    return r, time.monotonic() - start, fresh


@contextlib.contextmanager
def case_folder(keep: str | None) -> Iterator[str]:
    """The folder the cases run in: `keep`, made here and kept, or a temporary one."""
    if keep is None:
        with tempfile.TemporaryDirectory() as tmp:
            yield tmp
        return
    try:
        os.makedirs(keep)
    except FileExistsError:
        raise InputError(f"--keep {keep}: exists already (give a new folder)") from None
    yield os.path.abspath(keep)


def case_parser(prog: str, description: str, cases: int,
                timeout: float | None) -> argparse.ArgumentParser:
    """The arguments of a script of random cases (this one, explore_runs.py): the program, how
    many cases, the seed, and one case's time limit in seconds (at most a day)."""
    ap = OneLineParser(prog=prog, description=description)
    ap.add_argument("ppbench")
    ap.add_argument("--cases", type=number(int, 1), default=cases)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=number(float, 0, 86400, low_open=True), default=timeout)
    ap.add_argument("--memory-cap", type=number(float, 0.25, 1024), default=4.0,
                    help="GiB of address space a case may take (RLIMIT_AS)")
    return ap


def program_of(a: argparse.Namespace) -> str:
    """The arguments' program as an absolute path; InputError where it is not an executable
    file."""
    ppbench = os.path.abspath(a.ppbench)
    if not os.path.isfile(ppbench) or not os.access(ppbench, os.X_OK):
        raise InputError(f"{a.ppbench}: not an executable program")
    return ppbench


def main(argv: list[str] | None = None) -> int:
    ap = case_parser("fuzz_cli", __doc__.splitlines()[0], cases=500, timeout=None)
    ap.add_argument("--command", nargs="+", default=sorted(BASES), choices=sorted(BASES))
    ap.add_argument("--keep", metavar="DIR",
                    help="run the cases in DIR (made here; it must not exist) and keep it, so "
                         "that a finding's input files stay there to run it again")
    a = ap.parse_args(argv)
    ppbench = program_of(a)
    rng = random.Random(a.seed)
    options = {c: options_of(ppbench, c) for c in a.command}
    cap = int(a.memory_cap * 2**30)
    codes: dict[int | str, int] = {}
    findings = []
    slowest: dict[str, tuple[float, list[str]]] = {}
    with case_folder(a.keep) as tmp:
        files = write_inputs(tmp)
        files.tmp, files.fresh = tmp, 0
        for k in range(a.cases):
            command = a.command[k % len(a.command)]
            argv = make_case(rng, command, options[command], files)
            limit = a.timeout or TIMEOUTS[command]
            r, seconds, fresh = run_case(ppbench, argv, limit, tmp, cap)
            if seconds > slowest.get(command, (-1.0, []))[0]:
                slowest[command] = (seconds, argv)
            if r is None:
                codes["past limit"] = codes.get("past limit", 0) + 1
                why, err = f"past its time limit of {limit:g} s", ""
            else:
                codes[r.returncode] = codes.get(r.returncode, 0) + 1
                why, err = broken(r, argv, fresh), r.stderr.strip()[-400:]
            if why:
                findings.append((why, argv, err))
                print(f"BROKEN ({why}): ppbench {shlex.join(argv)}\n  {err}", flush=True)
    for command, (seconds, argv) in sorted(slowest.items()):
        print(f"slowest {command}: {seconds:.2f} s, ppbench {shlex.join(argv)[:200]}")
    past = a.cases - codes.get(2, 0)
    print(f"fuzz_cli: {a.cases} cases, seed {a.seed}: exit codes "
          f"{dict(sorted(codes.items(), key=str))}, {past} past the argument checks, "
          f"{len(findings)} broke the contract")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(run("fuzz_cli", main))
