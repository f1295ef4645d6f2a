#!/usr/bin/env python3
"""Summarise one GoogleTest run for scripts/gpu-check.sh: passed, failed and skipped tests, where a
skip counts as a failure unless its message contains an allowed reason ("needs two GPUs" by
default: the two-GPU cases cannot run on a one-GPU machine). On a machine with a GPU a skipped
GPU test means the GPU code was not exercised, which must not read as a pass.

Reads the --gtest_output JSON and the run's console log. GoogleTest up to 1.12 leaves skip messages
out of its JSON, so they are taken from the log ("file:line: Skipped" and the message after it);
where there is no JSON (the run crashed or was killed at its time limit) the results are read from
the log, and a test that started without finishing is a failure.

Usage: gtest_summary.py --json FILE --log FILE [--allow-skip TEXT]... [--out FILE]
Prints one line on stdout; writes the summary as JSON to --out.
Exit: 0 no failed test and no disallowed skip; 1 otherwise (or no results at all); 2 bad usage,
a --json file of the wrong shape or an --out that cannot be written.
Plain python3, no third-party modules.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from results_io import atomic_write
from script_cli import InputError, OneLineParser, json_kind, output_path, run, shaped

DEFAULT_ALLOWED = ["needs two GPUs"]

RUN = re.compile(r"^\[ RUN      \] (\S+)")
END = re.compile(r"^\[(       OK |  FAILED  |  SKIPPED )\] ([^\s,]+)")
SKIP_HEAD = re.compile(r"^.*:\d+: Skipped\s*$|^unknown file: Skipped\s*$")


def parse_log(text: str) -> tuple[dict[str, str], dict[str, str], str | None]:
    """(result per test: OK/FAILED/SKIPPED, skip message per test, test left unfinished)."""
    results: dict[str, str] = {}
    messages: dict[str, str] = {}
    current: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        m = RUN.match(line)
        if m:
            current, body = m.group(1), []
            continue
        m = END.match(line)
        if m and current is not None and m.group(2) == current:
            kind = m.group(1).strip()
            results[current] = kind
            if kind == "SKIPPED":
                messages[current] = skip_message(body)
            current, body = None, []
            continue
        if current is not None:
            body.append(line)
    return results, messages, current


def skip_message(body: list[str]) -> str:
    """The text after the last 'file:line: Skipped' line of a test's output."""
    start = None
    for i, line in enumerate(body):
        if SKIP_HEAD.match(line):
            start = i + 1
    lines = body[start:] if start is not None else body
    return " ".join(s.strip() for s in lines if s.strip())


def parse_json(data: dict) -> dict[str, tuple[str, str, str]]:
    """name -> (result COMPLETED/SKIPPED/SUPPRESSED, failure text, skip message if the JSON has it).

    GoogleTest wrote the file, but a file of another shape (a list, a suite that is not an
    object) is an InputError naming what is wrong, not a traceback; summarise names the file."""
    if not isinstance(data, dict):
        raise InputError(f"a JSON object was expected, not {json_kind(type(data))}")
    out = {}
    for suite in _items(data, "testsuites", "the file"):
        for t in _items(suite, "testsuite", f"suite {suite.get('name', '?')!r}"):
            name = f"{suite.get('name', '?')}.{t.get('name', '?')}"
            failures = "; ".join(str(f.get("failure", ""))
                                 for f in _items(t, "failures", f"test {name!r}"))
            skipped = t.get("skipped")  # newer GoogleTest: [{"message": ...}]
            msg = ""
            if isinstance(skipped, list):
                msg = " ".join(str(s.get("message", "")) for s in skipped if isinstance(s, dict))
            elif isinstance(skipped, dict):
                msg = str(skipped.get("message", ""))
            out[name] = (t.get("result", "COMPLETED"), failures, msg.strip())
    return out


def _items(parent: dict, key: str, where: str) -> list[dict]:
    """parent[key]: a list of objects (absent or null: none)."""
    value = parent.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InputError(f"'{key}' of {where} is not a list of objects: {str(value)[:80]}")
    return value


def summarise(json_path: Path | None, log_path: Path | None, allowed: list[str]) -> dict:
    log_text = ""
    if log_path and log_path.is_file():
        log_text = log_path.read_text(encoding="utf-8", errors="replace")
    log_results, log_messages, unfinished = parse_log(log_text)

    data = None
    if json_path and json_path.is_file():
        try:
            data = json.loads(json_path.read_text(encoding="utf-8", errors="replace"))
        except ValueError:
            data = None

    passed: list[str] = []
    failed: list[dict] = []
    allowed_skips: list[dict] = []
    bad_skips: list[dict] = []

    def skip(name: str, reason: str) -> None:
        reason = reason or "(no message)"
        if any(a in reason for a in allowed):
            allowed_skips.append({"name": name, "reason": reason})
        else:
            bad_skips.append({"name": name, "reason": reason})

    if data is not None:
        source = "json"
        try:
            with shaped(f"--json {json_path}"):
                tests = parse_json(data)
        except InputError as e:
            what = f"--json {json_path}"
            raise InputError(str(e) if str(e).startswith(what) else f"{what}: {e}") from None
        for name, (result, failures, msg) in tests.items():
            if result == "SUPPRESSED":
                continue  # filtered out or another shard's
            if failures:
                failed.append({"name": name, "reason": failures.strip()[:500]})
            elif result == "SKIPPED":
                skip(name, msg or log_messages.get(name, ""))
            else:
                passed.append(name)
    elif log_results or unfinished:
        source = "log"
        for name, kind in log_results.items():
            if kind == "FAILED":
                failed.append({"name": name, "reason": "failed (see the log)"})
            elif kind == "SKIPPED":
                skip(name, log_messages.get(name, ""))
            else:
                passed.append(name)
        if unfinished:
            failed.append({"name": unfinished,
                           "reason": "started but did not finish "
                                     "(crashed or killed at the time limit)"})
    else:
        source = "none"

    ok = source != "none" and not failed and not bad_skips
    return {
        "source": source,
        "tests": len(passed) + len(failed) + len(allowed_skips) + len(bad_skips),
        "passed": len(passed),
        "failed": len(failed),
        "skipped": len(allowed_skips) + len(bad_skips),
        "failed_tests": failed,
        "skipped_disallowed": bad_skips,
        "skipped_allowed": allowed_skips,
        "allowed_skip_reasons": allowed,
        "ok": ok,
    }


def one_line(s: dict) -> str:
    if s["source"] == "none":
        return "no test results (no gtest JSON and no test lines in the log)"
    text = (f"{s['tests']} tests: {s['passed']} passed, {s['failed']} failed, "
            f"{s['skipped']} skipped ({len(s['skipped_allowed'])} allowed)")
    if s["failed_tests"]:
        text += "; FAILED: " + ", ".join(t["name"] for t in s["failed_tests"][:10])
    if s["skipped_disallowed"]:
        first = s["skipped_disallowed"][0]
        text += (f"; SKIPPED where a GPU is visible (a failure): "
                 f"{', '.join(t['name'] for t in s['skipped_disallowed'][:10])}"
                 f"{' ...' if len(s['skipped_disallowed']) > 10 else ''} "
                 f"(first reason: {first['reason'][:160]})")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="gtest_summary", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="the --gtest_output=json file")
    ap.add_argument("--log", type=Path, help="the run's console output")
    ap.add_argument("--allow-skip", action="append", default=None, metavar="TEXT",
                    help="a skip whose message contains TEXT is allowed "
                         f"(default: {DEFAULT_ALLOWED})")
    ap.add_argument("--out", type=Path, help="write the summary JSON here (atomically)")
    args = ap.parse_args(argv)
    if args.json is None and args.log is None:
        ap.error("give --json and/or --log")
    if args.out:
        output_path(args.out, "--out")
    s = summarise(args.json, args.log, args.allow_skip or DEFAULT_ALLOWED)
    if args.out:
        atomic_write(args.out, json.dumps(s, indent=2))
    print(one_line(s))
    return 0 if s["ok"] else 1


if __name__ == "__main__":
    sys.exit(run("gtest_summary", main))
