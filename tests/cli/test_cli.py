#!/usr/bin/env python3
"""The ppbench command-line contract, exercised as a new user would.

Bad input must give exit code 2 and exactly one line on stderr naming the bad
value, with nothing on stdout and no file written. Run by ctest with the path
of the ppbench binary; standard library only, so it runs before the venv.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60)


class BadInput(unittest.TestCase):
    CASES = [
        # (arguments, a word the message must contain)
        (["simulate", "-s", "nosuch", "-d", "4", "-n", "8"], "nosuch"),
        (["simulate", "-s", "1f1b", "-d", "4", "-n", "3"], "N=3"),
        (["simulate", "-s", "dualpipe", "-d", "3", "-n", "12"], "3"),
        (["simulate", "-s", "dualpipe", "-d", "4", "-n", "6"], "6"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--chunks", "2"], "--chunks"),
        (["simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--group-size", "4"], "--group-size"),
        (["simulate", "-s", "interleaved-1f1b", "-d", "4", "-n", "8", "--chunks", "1"], "--chunks"),
        (["simulate", "-s", "interleaved-1f1b", "-d", "4", "-n", "8", "--group-size", "2"], "group size"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=-1"], "F=-1"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=abc"], "abc"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "X=1"], "X"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F1"], "F1"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "B=1,I=2"], "B="),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--comm", "-1"], "--comm"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--comm", "x"], "x"),
        (["simulate", "-s", "gpipe", "-d", "0", "-n", "8"], "--devices"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "-2"], "--microbatches"),
        (["simulate", "-s", "gpipe", "-d", "four", "-n", "8"], "four"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--format", "xml"], "xml"),
        (["simulate", "-s", "gpipe", "-n", "8"], "--devices"),
        (["show", "-s", "gpipe", "-d", "4", "-n", "8", "--format", "grid", "--cost", "F=0.5"], "grid"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--bogus"], "--bogus"),
        (["nosuchcommand"], "nosuchcommand"),
        ([], "subcommand"),
    ]

    def test_exit_2_with_one_line_naming_the_value(self):
        for args, needle in self.CASES:
            with self.subTest(args=args):
                r = run(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stdout, "")
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn(needle, lines[0])

    def test_no_trace_file_on_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.json")
            r = run("simulate", "-s", "1f1b", "-d", "4", "-n", "2", "--trace-out", out)
            self.assertEqual(r.returncode, 2)
            self.assertFalse(os.path.exists(out))
            r = run("simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--trace-out",
                    os.path.join(d, "missing-dir", "t.json"))
            self.assertEqual(r.returncode, 2)
            self.assertIn("missing-dir", r.stderr)


class Contract(unittest.TestCase):
    def test_json_names(self):
        r = run("simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = json.loads(r.stdout)
        for key in ["schedule", "devices", "microbatches", "chunks", "stages", "makespan",
                    "bubble_fraction", "bubble_ratio", "zb_bubble_rate", "ranks", "provenance"]:
            self.assertIn(key, rec)
        self.assertEqual(len(rec["ranks"]), 4)
        for rk in rec["ranks"]:
            self.assertEqual(set(rk) >= {"rank", "busy", "idle", "span_idle", "peak_activations"}, True)
        self.assertAlmostEqual(rec["bubble_fraction"], 3 / 11, places=12)
        self.assertEqual(rec["makespan"], 33)

    def test_commit_of_a_tree_copied_without_git(self):
        # A lent GPU machine gets the working tree without .git: the commit is handed over in
        # PPBENCH_GIT_COMMIT and lands in the provenance instead of "unknown".
        env = {**os.environ, "GIT_DIR": "/nonexistent-ppbench-git", "PPBENCH_GIT_COMMIT": "abc123def456"}
        args = ["simulate", "-s", "1f1b", "-d", "2", "-n", "4", "--format", "json"]
        r = subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["provenance"]["git_commit"], "abc123def456")
        del env["PPBENCH_GIT_COMMIT"]
        r = subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(json.loads(r.stdout)["provenance"]["git_commit"], "unknown")

    def test_cost_derivation_rules(self):
        def costs(spec):
            r = run("simulate", "-s", "gpipe", "-d", "2", "-n", "2", "--cost", spec, "--format", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)["costs"]
        self.assertEqual(costs("B=4"), {"F": 1, "B": 4, "I": 2, "W": 2, "FB": 5, "comm": 0})
        self.assertEqual(costs("I=3,W=2"), {"F": 1, "B": 5, "I": 3, "W": 2, "FB": 6, "comm": 0})
        self.assertEqual(costs("F=2,B=3,I=1"), {"F": 2, "B": 3, "I": 1, "W": 2, "FB": 5, "comm": 0})
        self.assertEqual(costs("F=1,FB=2.5")["FB"], 2.5)

    def test_comm_delays_the_step(self):
        def makespan(*extra):
            r = run("simulate", "-s", "gpipe", "-d", "4", "-n", "4", "--format", "json", *extra)
            return json.loads(r.stdout)["makespan"]
        self.assertEqual(makespan(), 21)
        self.assertEqual(makespan("--comm", "0.5"), 21 + 2 * 3 * 0.5)

    def test_show_text_round_trip_form(self):
        r = run("show", "-s", "gpipe", "-d", "2", "-n", "2")
        self.assertEqual(r.stdout, "rank 0: F0.0 F0.1 B0.1 B0.0\nrank 1: F1.0 F1.1 B1.1 B1.0\n")

    def test_grid_and_csv_and_trace(self):
        r = run("show", "-s", "1f1b", "-d", "2", "-n", "2", "--format", "grid")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rank 1:", r.stdout)
        r = run("simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--format", "csv")
        rows = r.stdout.strip().splitlines()
        self.assertEqual(len(rows), 5)
        self.assertTrue(rows[0].startswith("schedule,devices"))
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.json")
            r = run("simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--trace-out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                events = json.load(f)["traceEvents"]
            self.assertEqual(sum(1 for e in events if e.get("ph") == "X" and e["pid"] == 0), 64)

    def test_list_and_help_and_version(self):
        r = run("list")
        for name in ["naive", "gpipe", "1f1b", "interleaved-1f1b", "chimera", "zb-h1", "zb-h2",
                     "zb-v", "dualpipe", "dualpipev"]:
            self.assertIn(name, r.stdout)
        self.assertEqual(run("simulate", "--help").returncode, 0)
        self.assertIn("ppbench", run("--version").stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
