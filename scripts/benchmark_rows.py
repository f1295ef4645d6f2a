#!/usr/bin/env python3
"""Keep the finished rows of a Google Benchmark program that was stopped before it ended, for
scripts/gpu-check.sh: a GPU benchmark killed at its piece's time limit leaves a cut
--benchmark_out file (the file stream's buffer is lost with the process) and a console log whose
JSON ends mid-row. This writes one whole Google Benchmark JSON from what finished.

Google Benchmark's JSON reporter writes the context object and then one object per finished row,
so every object before the cut is whole: each is decoded where it stands, and the first that does
not decode (the row being written when the program stopped) ends the list. Lines that are not
the reporter's (the bundle launcher's banner, a benchmark's own messages on stderr, which share
the log) are dropped first: the reporter's lines are indented or are a lone bracket or brace.

The file written is Google Benchmark's shape with one key more, "cut": {"source", "rows"}, so
that a reader which needs the whole run (a GEMM peak taken as the best of every row) can tell.
A --json that already parses whole is copied as it is, without "cut".

Usage: benchmark_rows.py [--json FILE] [--log FILE] --out FILE
Prints one line. Exit: 0 a whole run or at least one row kept; 1 no row to keep; 2 bad usage or
an --out that cannot be written. Plain python3, no third-party modules.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from results_io import atomic_write
from script_cli import OneLineParser, output_path, run

# The reporter's own lines: indented, or one of the brackets that open and close its document.
REPORTER_LINE = re.compile(r"^(\s|[{}\[\]],?\s*$)")


def reporter_text(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if REPORTER_LINE.match(line))


def decode_at(text: str, start: int) -> tuple[object, int] | None:
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):  # cut, or nested past what Python's parser takes
        return None


def value_after(text: str, key: str, opening: str, start: int = 0) -> int | None:
    """Where the value of "key" opens (its `opening` bracket), or None."""
    m = re.compile(r'"' + re.escape(key) + r'"\s*:\s*' + re.escape(opening)).search(text, start)
    return m.end() - 1 if m else None


def salvage(text: str) -> dict | None:
    """{"context", "benchmarks"} from a cut reporter document, or None where no row finished."""
    text = reporter_text(text)
    context: object = {}
    at = value_after(text, "context", "{")
    if at is not None:
        decoded = decode_at(text, at)
        if decoded is not None:
            context = decoded[0]
    at = value_after(text, "benchmarks", "[")
    if at is None:
        return None
    rows: list[dict] = []
    pos = at + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            break
        decoded = decode_at(text, pos)
        if decoded is None or not isinstance(decoded[0], dict):
            break  # the row the program was writing when it stopped
        rows.append(decoded[0])
        pos = decoded[1]
    if not rows:
        return None
    return {"context": context if isinstance(context, dict) else {}, "benchmarks": rows}


def read(path: Path | None) -> str:
    if path is None or not path.is_file():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")


def keep(json_path: Path | None, log_path: Path | None) -> tuple[dict | None, str]:
    """(the document to write, one line saying what it is)."""
    whole = read(json_path)
    try:
        data = json.loads(whole)
        if isinstance(data, dict) and isinstance(data.get("benchmarks"), list):
            return data, f"whole: {len(data['benchmarks'])} rows"
    except (ValueError, RecursionError):
        pass
    best: dict | None = None
    source = ""
    for name, text in (("json", whole), ("log", read(log_path))):
        found = salvage(text)
        if found is not None and (best is None
                                  or len(found["benchmarks"]) > len(best["benchmarks"])):
            best, source = found, name
    if best is None:
        return None, "no finished row in the JSON or the log"
    n = len(best["benchmarks"])
    best["cut"] = {"source": source, "rows": n}
    last = best["benchmarks"][-1].get("name", "?")
    return best, f"cut: {n} finished rows kept from the {source}, the last {last}"


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="benchmark_rows", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="the program's --benchmark_out file (may be cut)")
    ap.add_argument("--log", type=Path, help="its console output (--benchmark_format=json)")
    ap.add_argument("--out", type=Path, required=True, help="the whole JSON to write (atomically)")
    args = ap.parse_args(argv)
    if args.json is None and args.log is None:
        ap.error("give --json and/or --log")
    output_path(args.out, "--out")
    data, line = keep(args.json, args.log)
    print(line)
    if data is None:
        return 1
    atomic_write(args.out, json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run("benchmark_rows", main))
