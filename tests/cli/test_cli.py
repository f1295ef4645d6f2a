#!/usr/bin/env python3
"""The ppbench command-line contract, exercised as a new user would.

Bad input must give exit code 2 and exactly one line on stderr naming the bad
value, with nothing on stdout and no file written. Run by ctest with the path
of the ppbench binary; standard library only, so it runs before the venv.
"""
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from cli_checks import one_line, one_line_refusal  # the directory of this script is on sys.path

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
        (["simulate", "-s", "interleaved-1f1b", "-d", "4", "-n", "8", "--group-size", "2"],
         "group size"),
        (["simulate", "-s", "looped-bfs", "-d", "4", "-n", "8", "--group-size", "4"],
         "--group-size"),
        (["simulate", "-s", "interleaved-zb", "-d", "4", "-n", "9"], "N=9"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=-1"], "F=-1"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=abc"], "abc"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "X=1"], "X"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F1"], "F1"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "B=1,I=2"], "B="),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--comm", "-1"], "--comm"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--comm", "x"], "x"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cores", "0"], "--cores"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cores", "two"], "two"),
        (["simulate", "-s", "gpipe", "-d", "0", "-n", "8"], "--devices"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "-2"], "--microbatches"),
        (["simulate", "-s", "gpipe", "-d", "four", "-n", "8"], "four"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--format", "xml"], "xml"),
        (["simulate", "-s", "gpipe", "-n", "8"], "--devices"),
        (["show", "-s", "gpipe", "-d", "4", "-n", "8", "--format", "grid", "--cost", "F=0.5"],
         "grid"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--bogus"], "--bogus"),
        (["nosuchcommand"], "nosuchcommand"),
        ([], "subcommand"),
        # Costs: finite, > 0, at most 1e12, each key once, B = I + W when all three are given.
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=1e308"], "F=1e308"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=1e400"], "F=1e400"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=nan"], "F=nan"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=0"], "F=0"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "B=2,I=1,W=5"], "I + W"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=1,F=2"], "twice"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", ""], "--cost"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--comm", "nan"], "--comm"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--comm", "1e400"], "--comm"),
        (["simulate", "-s", "gpipe", "-d", "010", "-n", "8", "--chunks", "0"], "--chunks"),
        (["show", "-s", "gpipe", "-d", "4", "-n", "8", "--cost", "F=-1"], "F=-1"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--trace-out", ""], "--trace-out"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--max-memory", "64X"], "--max-memory"),
        (["simulate", "-s", "gpipe", "-d", "4", "-n", "8", "--max-memory", "1K"], "--max-memory"),
        # --memory-limit: finite, > 0, and only for the families that plan for it.
        (["simulate", "-s", "zb-1p", "-d", "4", "-n", "8", "--memory-limit", "0"], "'0'"),
        (["simulate", "-s", "zb-1p", "-d", "4", "-n", "8", "--memory-limit", "-3"], "'-3'"),
        (["simulate", "-s", "zb-2p", "-d", "4", "-n", "8", "--memory-limit", "nan"], "'nan'"),
        (["simulate", "-s", "zb-2p", "-d", "4", "-n", "8", "--memory-limit", "inf"], "'inf'"),
        (["show", "-s", "zb-2p", "-d", "4", "-n", "8", "--memory-limit", "lots"], "'lots'"),
        (["show", "-s", "zb-1p", "-d", "4", "-n", "8", "--memory-limit", "0.5"],
         "--memory-limit 0.5"),
        (["simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--memory-limit", "4"], "'1f1b'"),
        (["simulate", "-s", "zb-2p", "-d", "4", "-n", "8", "--w-memory", "1.5"], "'1.5'"),
        (["simulate", "-s", "zb-2p", "-d", "4", "-n", "8", "--w-memory", "-0.5"], "'-0.5'"),
        (["show", "-s", "zb-h2", "-d", "4", "-n", "8", "--w-memory", "0.5"], "'zb-h2'"),
    ]

    def test_exit_2_with_one_line_naming_the_value(self):
        for args, needle in self.CASES:
            with self.subTest(args=args):
                one_line_refusal(self, run(*args), needle)

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


class ZbAutoPlan(unittest.TestCase):
    """zb-1p / zb-2p plan for --cost, --comm and --memory-limit, and records say so."""

    def test_simulate_records_the_plan(self):
        r = run("simulate", "-s", "zb-1p", "-d", "4", "-n", "10", "--cost", "F=5,I=6,W=4",
                "--comm", "1", "--memory-limit", "5", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["plan"],
                         {"F": 5, "I": 6, "W": 4, "comm": 1, "memory_limit": 5, "w_memory": 1})
        r = run("simulate", "-s", "zb-2p", "-d", "4", "-n", "8", "--format", "json")
        self.assertEqual(json.loads(r.stdout)["plan"]["memory_limit"], 8)  # default 2D
        r = run("simulate", "-s", "zb-2p", "-d", "4", "-n", "8", "--w-memory", "0.25",
                "--format", "json")
        self.assertEqual(json.loads(r.stdout)["plan"]["w_memory"], 0.25)
        r = run("simulate", "-s", "zb-h1", "-d", "4", "-n", "8", "--format", "json")
        self.assertNotIn("plan", json.loads(r.stdout))

    def test_show_plans_for_the_costs(self):
        # The reference search's rank 0 for these costs (tests/schedules/test_zb_auto.cpp).
        r = run("show", "-s", "zb-1p", "-d", "4", "-n", "10", "--cost", "F=5,I=6,W=4",
                "--comm", "1", "--memory-limit", "5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(
            "rank 0: F0.0 F0.1 F0.2 F0.3 F0.4 I0.0 W0.0 F0.5 I0.1 W0.1 F0.6 I0.2 I0.3 W0.2"),
            r.stdout)
        uniform = run("show", "-s", "zb-1p", "-d", "4", "-n", "10", "--memory-limit", "5")
        self.assertNotEqual(uniform.stdout, r.stdout)


def make_char_device(path, minor):
    """A character device node like /dev/null (minor 3) or /dev/full (minor 7) in a temp dir, so
    that a ppbench that replaced its output could not damage the real ones; None where mknod is
    not allowed."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        return path
    except (PermissionError, OSError):
        return None


class Outputs(unittest.TestCase):
    """--trace-out and stdout: devices, FIFOs and - are streamed to, symlinks followed, regular
    files replaced atomically, directories refused; write errors are exit 3 with one line."""
    SIM = ["simulate", "-s", "1f1b", "-d", "4", "-n", "8"]

    def test_a_trace_onto_the_schedule_file_it_simulates_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            sched = os.path.join(d, "s.txt")
            text = "rank 0: F0.0 F0.1 B0.1 B0.0\nrank 1: F1.0 F1.1 B1.1 B1.0\n"
            with open(sched, "w") as f:
                f.write(text)
            r = run("simulate", "--schedule-file", sched, "--trace-out",
                    os.path.join(d, ".", "s.txt"))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("is the same file as --schedule-file", r.stderr)
            with open(sched) as f:
                self.assertEqual(f.read(), text)

    def test_character_devices_are_written_not_replaced(self):
        with tempfile.TemporaryDirectory() as d:
            null = make_char_device(os.path.join(d, "null"), 3)
            full = make_char_device(os.path.join(d, "full"), 7)
            if null is None:
                if os.geteuid() == 0:
                    self.skipTest("mknod not allowed (and /dev/null must not be risked as root)")
                null, full = "/dev/null", "/dev/full"
            r = run(*self.SIM, "--trace-out", null)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(stat.S_ISCHR(os.stat(null).st_mode), "the device was replaced")
            r = run(*self.SIM, "--trace-out", full)
            line = one_line(self, r, 3)  # the machine, not the input
            self.assertIn("No space left", line)
            self.assertTrue(stat.S_ISCHR(os.stat(full).st_mode), "the device was replaced")
            # stdout itself on a full device is an error too, not exit 0.
            with open(full, "w") as out:
                r = subprocess.run([PPBENCH, "list"], stdout=out, stderr=subprocess.PIPE, text=True,
                                   timeout=60)
            self.assertIn("No space left", one_line(self, r, 3))
            # and so is --help or --version that cannot be printed
            for flag in (["--help"], ["--version"], ["simulate", "--help"]):
                with open(full, "w") as out:
                    r = subprocess.run([PPBENCH, *flag], stdout=out, stderr=subprocess.PIPE,
                                       text=True, timeout=60)
                self.assertIn("No space left", one_line(self, r, 3))

    def test_fifo_is_streamed_to(self):
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "pipe")
            os.mkfifo(fifo)
            got = {}
            reader = threading.Thread(target=lambda: got.setdefault("text", open(fifo).read()),
                                      daemon=True)
            reader.start()
            r = run(*self.SIM, "--trace-out", fifo)
            reader.join(timeout=10)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced")
            self.assertIn("traceEvents", json.loads(got["text"]))

    def test_symlink_is_followed_and_kept(self):
        with tempfile.TemporaryDirectory() as d:
            target, link = os.path.join(d, "target.json"), os.path.join(d, "link.json")
            with open(target, "w") as f:
                f.write("old")
            os.symlink("target.json", link)
            r = run(*self.SIM, "--trace-out", link)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.islink(link))
            with open(target) as f:
                self.assertIn("traceEvents", json.load(f))
            self.assertEqual(sorted(os.listdir(d)), ["link.json", "target.json"])

    def test_directory_is_refused_clearly(self):
        with tempfile.TemporaryDirectory() as d:
            line = one_line(self, run(*self.SIM, "--trace-out", d), 2)
            self.assertIn("is a directory", line)
            self.assertNotIn("Success", line)
            self.assertEqual(os.listdir(d), [])

    def test_dash_is_stdout(self):
        r = run(*self.SIM, "--trace-out", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("traceEvents", json.loads(r.stdout))

    def test_no_temp_file_is_ever_visible(self):
        # The trace is written to an unnamed file and linked in when complete: watching the
        # directory while ppbench writes (and killing it the moment anything else shows up) finds
        # nothing but the complete target. The old writer left `.t.json.tmp.<pid>` when killed.
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.json")
            p = subprocess.Popen([PPBENCH, "simulate", "-s", "zb-v", "-d", "16", "-n", "2048",
                                  "--trace-out", out], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            seen = set()
            while p.poll() is None:
                names = set(os.listdir(d))
                seen |= names
                if names - {"t.json"}:
                    p.kill()
                    break
                time.sleep(0.0005)
            p.wait(timeout=120)
            self.assertEqual(seen - {"t.json"}, set(), "a temp file was visible")
            self.assertEqual(p.returncode, 0, p.stderr.read())
            with open(out) as f:
                self.assertIn("traceEvents", json.load(f))


class Numbers(unittest.TestCase):
    def test_range_messages_print_bounds_readably(self):
        for args in (["simulate", "-s", "1f1b", "-d", "5000", "-n", "8"],
                     ["simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--comm", "-1"],
                     ["simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--comm", "1e300"]):
            with self.subTest(args=args):
                line = one_line(self, run(*args), 2)
                self.assertLess(max(len(n) for n in re.findall(r"\d+", line)), 21, line)

    def test_costs_never_make_inf_or_nan(self):
        r = run("simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--cost", "F=1e12,B=1e12",
                "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = json.loads(r.stdout)
        for key in ["makespan", "bubble_fraction", "bubble_ratio", "zb_bubble_rate"]:
            self.assertTrue(0 <= rec[key] < float("inf"), (key, rec[key]))

    def test_huge_schedules_are_refused_before_work(self):
        # The estimate, not the work: its words say the size was bounded before anything was
        # built (run's own timeout catches a build that began).
        line = one_line(self, run("simulate", "-s", "1f1b", "-d", "4096", "-n", "1048576"), 2)
        for needle in ["--devices 4096", "--microbatches 1048576", "needs about", "available"]:
            self.assertIn(needle, line)
        line = one_line(self, run("show", "-s", "gpipe", "-d", "64", "-n", "65536", "--format",
                                  "lowered", "--max-memory", "64M"), 2)
        self.assertIn("--max-memory 64M", line)
        # A grid as wide as the step is long: refused from the simulated length, before drawing.
        line = one_line(self, run("show", "-s", "gpipe", "-d", "4", "-n", "8", "--format", "grid",
                                  "--cost", "F=1e12"), 2)
        self.assertIn("grid", line)

    def test_leading_zeros_are_decimal(self):
        # CLI11 alone reads 010 as octal 8; the validators' decimal rewrite must reach the value.
        r = run("simulate", "-s", "1f1b", "-d", "016", "-n", "016", "--cores", "010",
                "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = json.loads(r.stdout)
        self.assertEqual((rec["devices"], rec["microbatches"], rec["cores"]), (16, 16, 10))
        r = run("model", "-w", "mlp", "--layers", "010", "--width", "08", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["config"]["width"], 8)
        line = one_line(self, run("simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--cores",
                                  "abc"), 2)
        self.assertIn("'abc' is not an integer", line)

    def test_a_cost_below_the_grid_rounding_is_refused_not_dropped(self):
        # F = 1e-10 rounds to a cell of width 0: every forward would vanish from the grid.
        line = one_line(self, run("show", "-s", "1f1b", "-d", "2", "-n", "2", "--format", "grid",
                                  "--cost", "F=1e-10,B=2"), 2)
        self.assertIn("has no cell", line)

    def test_memory_refuses_what_the_flags_alone_refuse_before_proving_the_schedule(self):
        # An unknown --partition is named even where the schedule itself is not allowed (D = 3
        # for dualpipe): the cheap check comes first.
        line = one_line(self, run("memory", "-w", "mlp", "-s", "dualpipe", "-d", "3", "-n", "8",
                                  "--partition", "foo"), 2)
        self.assertIn("unknown --partition 'foo'", line)
        line = one_line(self, run("memory", "-w", "mlp", "-s", "dualpipe", "-d", "3", "-n", "8",
                                  "--backend", "cuda", "--dtype", "f64"), 2)
        self.assertIn("--dtype f64 with --backend cuda", line)

    def test_max_memory_names_a_bound_its_parser_takes(self):
        line = one_line(self, run("show", "-s", "1f1b", "-d", "4", "-n", "8", "--max-memory",
                                  "99999999999T"), 2)
        self.assertIn("below 8192P", line)


class TerminalSafety(unittest.TestCase):
    def test_control_characters_in_user_input_are_escaped(self):
        evil = "nos\x1b[31mred\nx"
        for args in (["simulate", "-s", evil, "-d", "4", "-n", "8"],
                     ["simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--format", evil],
                     ["simulate", "-s", "1f1b", "-d", evil, "-n", "8"],
                     ["simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--cost", "F=" + evil],
                     [evil]):
            with self.subTest(args=args):
                line = one_line(self, run(*args), 2)
                self.assertIn("\\x1b[31mred\\nx", line)

    def test_a_file_name_that_is_not_utf8_is_escaped_in_records_and_tables(self):
        # The schedule is named after its file: JSON output needs UTF-8, a terminal no escape
        # sequences, a CSV row no bare comma.
        with tempfile.TemporaryDirectory() as d:
            text = "rank 0: F0.0 B0.0\nrank 1: F1.0 B1.0\n"
            raw = os.path.join(os.fsencode(d), b"\xff\x1b[31m.txt")
            with open(raw, "w") as f:
                f.write(text)
            r = subprocess.run([os.fsencode(PPBENCH), b"memory", b"-w", b"mlp",
                                b"--schedule-file", raw, b"--format", b"json"],
                               capture_output=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["schedule"], "file:\\xff\\x1b[31m.txt")
            comma = os.path.join(d, 'a,"b".txt')
            with open(comma, "w") as f:
                f.write(text)
            r = run("simulate", "--schedule-file", comma, "--format", "csv")
            self.assertEqual(r.returncode, 0, r.stderr)
            row = r.stdout.splitlines()[1]
            self.assertTrue(row.startswith('"file:a,""b"".txt",2,1,'), row)


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
            self.assertLessEqual({"rank", "busy", "idle", "span_idle", "peak_activations"},
                                 set(rk))
        self.assertAlmostEqual(rec["bubble_fraction"], 3 / 11, places=12)
        self.assertEqual(rec["makespan"], 33)

    def test_model_memory_and_simulate_name_the_workload_alike(self):
        # One header for the three: the name, each shape setting (strings, numbers, booleans)
        # as key=value, the micro-batch size and the dtype.
        mlp = ["-w", "mlp", "--layers", "4", "--width", "32", "-b", "3", "--dtype", "f32"]
        tiny = ["-w", "transformer", "--preset", "tiny-llama", "-b", "2", "--dtype", "f64"]
        for flags, expected in (
                (mlp, "mlp classes=10 input_dim=32 layers=4 width=32, b=3, f32"), (tiny, None)):
            with self.subTest(workload=flags[1]):
                schedule = ["-s", "1f1b", "-d", "2", "-n", "2"]
                outputs = [run("model", *flags), run("memory", *flags, *schedule),
                           run("simulate", *flags, *schedule)]
                for r in outputs:
                    self.assertEqual(r.returncode, 0, r.stderr)
                model, memory, simulate = (r.stdout.splitlines() for r in outputs)
                header = model[0]
                if expected:
                    self.assertEqual(header, expected)
                self.assertIn(f", b={flags[flags.index('-b') + 1]}, ", header)
                self.assertEqual(memory[0], "memory of one training step: " + header)
                line = next(line for line in simulate if line.startswith("workload "))
                self.assertTrue(line.startswith("workload " + header + ", partition "), line)

    def test_commit_is_the_builds_not_the_environments(self):
        # The record names the commit the binary was built from (fixed at build time), so neither
        # the git state seen at run time nor PPBENCH_GIT_COMMIT (only for a build made from a copy
        # without .git) can make it name another one.
        args = ["simulate", "-s", "1f1b", "-d", "2", "-n", "4", "--format", "json"]
        plain = json.loads(run(*args).stdout)["provenance"]["git_commit"]
        self.assertNotEqual(plain, "")
        env = {**os.environ, "GIT_DIR": "/nonexistent-ppbench-git",
               "PPBENCH_GIT_COMMIT": "abc123def456"}
        r = subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["provenance"]["git_commit"], plain)
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True)
        if head.returncode == 0 and plain != "unknown":
            self.assertEqual(plain.removesuffix("-dirty"), head.stdout.strip())

    def test_cost_derivation_rules(self):
        def costs(spec):
            r = run("simulate", "-s", "gpipe", "-d", "2", "-n", "2", "--cost", spec,
                    "--format", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)["costs"]
        self.assertEqual(costs("B=4"), {"F": 1, "B": 4, "I": 2, "W": 2, "FB": 5, "comm": 0})
        self.assertEqual(costs("I=3,W=2"), {"F": 1, "B": 5, "I": 3, "W": 2, "FB": 6, "comm": 0})
        self.assertEqual(costs("F=2,B=3,I=1"), {"F": 2, "B": 3, "I": 1, "W": 2, "FB": 5, "comm": 0})
        self.assertEqual(costs("F=1,FB=2.5")["FB"], 2.5)
        for cost, words in [
                # No pair ends before its longer half alone.
                ("F=1,I=1,W=5,FB=0.5", "FB=0.5 is below max(F, B) = 6"),
                # A subnormal cost would make a ratio of times overflow to inf ...
                ("F=1e-320", "costs must be at least 1e-12"),
                # ... and so would one derived below the floor.
                ("F=1,B=1e-12", "I = 5e-13 as derived from the costs given is below 1e-12"),
                # A refused FB is named as given, not rounded to the limit it is below.
                ("F=1,B=2,FB=1.9999999999999", "FB=1.9999999999999 is below max(F, B) = 2")]:
            with self.subTest(cost=cost):
                line = one_line(self, run("simulate", "-s", "dualpipe", "-d", "2", "-n", "4",
                                          "--cost", cost), 2)
                self.assertIn(words, line)

    def test_the_text_names_what_the_closed_forms_leave_out(self):
        r = run("simulate", "-s", "1f1b", "-d", "4", "-n", "8", "--comm", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("note: closed forms assume --comm 0", r.stdout)
        r = run("simulate", "-s", "dualpipe", "-d", "4", "-n", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        # The value before the formula, whose own "PP = D" would otherwise read as "= value".
        self.assertIn("closed-form idle per rank: 2   (PP/2-1)", r.stdout)

    def test_comm_delays_the_step(self):
        def makespan(*extra):
            r = run("simulate", "-s", "gpipe", "-d", "4", "-n", "4", "--format", "json", *extra)
            return json.loads(r.stdout)["makespan"]
        self.assertEqual(makespan(), 21)
        self.assertEqual(makespan("--comm", "0.5"), 21 + 2 * 3 * 0.5)

    def test_shared_cores_serialise_the_work(self):
        # GPipe, D = 4, N = 4, F = 1, B = 2: 48 units of work. One core runs it back to back;
        # two cores at best halve it; as many cores as ranks is a device per rank (21).
        def record(*extra):
            r = run("simulate", "-s", "gpipe", "-d", "4", "-n", "4", "--format", "json", *extra)
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)
        self.assertEqual(record("--cores", "1")["makespan"], 48)
        self.assertEqual(record("--cores", "1")["cores"], 1)
        two = record("--cores", "2")
        self.assertGreaterEqual(two["makespan"], 24)
        self.assertLess(two["makespan"], 48)
        self.assertIn("shared core", two["closed_form"]["note"])
        for cores in ("4", "9"):
            own = record("--cores", cores)
            self.assertEqual(own["makespan"], 21)
            self.assertIsNone(own["cores"])

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
        for name in ["naive", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "interleaved-zb",
                     "chimera", "chimera-doubling", "zb-h1", "zb-h2", "zb-1p", "zb-2p", "zb-v",
                     "v-half", "v-min", "dualpipe", "dualpipev"]:
            self.assertIn(name, r.stdout)
        self.assertEqual(run("simulate", "--help").returncode, 0)
        self.assertIn("ppbench", run("--version").stdout)

    def test_list_keeps_every_description_in_its_column(self):
        # A constraint too long for its column moves the description to the next line, under
        # the column, rather than out of the table.
        registry = json.loads(run("list", "--format", "json").stdout)["schedules"]
        lines = run("list").stdout.splitlines()
        column = lines[0].index("description")
        for s in registry:
            at = next(i for i, line in enumerate(lines) if line.split(" ", 1)[0] == s["name"])
            line = lines[at]
            self.assertEqual(line[18:].split("  ")[0].strip(), s["constraints"], line)
            if line[column - 2:column] == "  " and line[column:].startswith(s["title"]):
                continue
            self.assertEqual(lines[at + 1], " " * column + s["title"], (line, lines[at + 1]))
            self.assertGreater(len(s["constraints"]) + 2, column - 18, line)


class CudaProgram(unittest.TestCase):
    """ppbench links no GPU library; `run --backend cuda` is made by ppbench-cuda beside it."""

    GPU_LIBRARIES = re.compile(r"lib(cuda|cudart|cublas|cublasLt|nccl|nvrtc|mpi\w*)\.so")

    def test_ppbench_links_no_gpu_or_mpi_library(self):
        # The shared libraries the program names (none where it is linked statically, as by
        # default): CUDA and MPI belong to the programs beside it.
        elf = subprocess.run(["readelf", "--dynamic", PPBENCH], capture_output=True, text=True)
        self.assertEqual(elf.returncode, 0, elf.stderr)
        needed = re.findall(r"Shared library: \[([^\]]+)\]", elf.stdout)
        self.assertEqual([lib for lib in needed if self.GPU_LIBRARIES.search(lib)], [], needed)

    def test_a_missing_cuda_program_is_one_line_and_exit_3(self):
        if "CUDA runs by ppbench-cuda" not in run("--version").stdout:
            self.skipTest("this ppbench was built without CUDA")
        with tempfile.TemporaryDirectory() as d:
            alone = os.path.join(d, "ppbench")
            with open(PPBENCH, "rb") as src, open(alone, "wb") as dst:
                dst.write(src.read())
            os.chmod(alone, 0o755)
            r = subprocess.run([alone, "run", "--backend", "cuda", "--workload", "mlp", "-s",
                                "1f1b", "-d", "2", "-n", "4"], capture_output=True, text=True,
                               timeout=60)
            # --version says what the copy alone cannot run, rather than that it can.
            version = subprocess.run([alone, "--version"], capture_output=True, text=True,
                                     timeout=60).stdout
        line = one_line(self, r, 3)
        self.assertEqual(r.stdout, "")
        self.assertIn("ppbench-cuda", line)
        self.assertIn("missing", line)
        self.assertIn("CUDA runs by ppbench-cuda, which is missing beside this ppbench", version)
        self.assertNotIn("MPI: compiled in", version)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
