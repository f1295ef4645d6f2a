#!/usr/bin/env python3
"""`--schedule-file` as a researcher would use it: a schedule written by `show` (text form or
PyTorch's CSV) reads back as the same schedule, simulates and runs like the family it came
from, and every broken file exits 2 with one line naming the file's line, rank and action.

Run with pytest (PPBENCH=build/ppbench by default) or as a script: test_schedule_file_cli.py
PPBENCH."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from cli_checks import address_space, one_line_refusal  # this folder is on sys.path

PPBENCH = os.environ.get("PPBENCH") or (
    sys.argv[1] if __name__ == "__main__" and len(sys.argv) > 1 else "build/ppbench")
MLP = ["run", "--workload", "mlp", "--layers", "4", "--width", "16"]


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=120)


def families():
    r = run("list", "--format", "json")
    assert r.returncode == 0, r.stderr
    return [s["name"] for s in json.loads(r.stdout)["schedules"]]


class FileTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def show(self, *args):
        r = run("show", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout


class RoundTrip(FileTestCase):
    def test_every_family_reads_back_through_text_and_csv(self):
        for name in families():
            with self.subTest(name):
                text = self.show("-s", name, "-d", "4", "-n", "8")
                path = self.write(name + ".txt", text)
                self.assertEqual(self.show("--schedule-file", path), text)
                csv = self.show("--schedule-file", path, "--format", "csv")
                self.assertEqual(csv,
                                 self.show("-s", name, "-d", "4", "-n", "8", "--format", "csv"))
                back = self.write(name + ".csv", csv)
                self.assertEqual(self.show("--schedule-file", back), text)

    def test_a_byte_order_mark_is_skipped(self):
        # as editors on Windows, and Excel's "CSV UTF-8", write it
        text = self.show("-s", "1f1b", "-d", "2", "-n", "2")
        csv = self.show("-s", "1f1b", "-d", "2", "-n", "2", "--format", "csv")
        for name, content in (("bom.txt", text), ("bom.csv", csv), ("bom_csv", csv)):
            with self.subTest(name):
                path = os.path.join(self.dir.name, name)
                with open(path, "wb") as f:
                    f.write(b"\xef\xbb\xbf" + content.encode())
                self.assertEqual(self.show("--schedule-file", path), text)

    def test_golden_csv(self):
        self.assertEqual(self.show("-s", "gpipe", "-d", "2", "-n", "2", "--format", "csv"),
                         "0F0,0F1,0B1,0B0\n1F0,1F1,1B1,1B0\n")

    def test_simulate_matches_the_family_and_names_the_file(self):
        gen = run("simulate", "-s", "zb-h1", "-d", "4", "-n", "8", "--format", "json")
        path = self.write("mine.txt", self.show("-s", "zb-h1", "-d", "4", "-n", "8"))
        got = run("simulate", "--schedule-file", path, "--format", "json")
        self.assertEqual(got.returncode, 0, got.stderr)
        a, b = json.loads(gen.stdout), json.loads(got.stdout)
        self.assertEqual(b["schedule"], "file:mine.txt")
        for key in ("devices", "microbatches", "stages", "actions", "makespan", "bubble_fraction"):
            self.assertEqual(a[key], b[key], key)
        # D and N given and agreeing are accepted.
        ok = run("simulate", "--schedule-file", path, "-d", "4", "-n", "8")
        self.assertEqual(ok.returncode, 0, ok.stderr)

    def test_run_from_a_pytorch_csv(self):
        order = self.show("-s", "zb-v", "-d", "2", "-n", "4", "--format", "csv")
        csv = self.write("zbv.csv", order)
        got = run(*MLP, "--schedule-file", csv, "--check", "--format", "json")
        self.assertEqual(got.returncode, 0, got.stderr)
        rec = json.loads(got.stdout)
        self.assertEqual(rec["schedule"], "file:zbv.csv")
        self.assertTrue(rec["check"]["passed"])
        gen = json.loads(run(*MLP, "-s", "zb-v", "-d", "2", "-n", "4", "--format", "json").stdout)
        self.assertEqual(rec["loss"], gen["loss"])


class BrokenFiles(FileTestCase):
    CASES = [
        # (file name, content, expected text of the one line)
        ("missing_w.txt", "# mine\nrank 0: F0.0 I0.0\nrank 1: F1.0 I1.0 W1.0\n",
         "missing_w.txt:2: invalid schedule: rank 0, action W0.0: missing: I is scheduled "
         "without its W"),
        ("twice.txt", "rank 0: F0.0 B0.0\nrank 1: F1.0 F1.0 B1.0\n",
         "twice.txt:2: invalid schedule: rank 1, action F1.0: F1.0 appears more than once"),
        ("wrong_rank.txt", "rank 0: F0.0 B0.0 F1.0 B1.0\nrank 1:\n",
         "wrong_rank.txt:1: invalid schedule: rank 0, action F1.0: stage 1 lives on rank 1"),
        ("deadlock.txt", "rank 0: F0.0 B0.0 F0.1 B0.1\nrank 1: F1.1 F1.0 B1.0 B1.1\n",
         "deadlock.txt:"),
        ("token.txt", "rank 0: F0.0 B0.0\nrank 1: F1.0 B1.0 Q\n",
         "token.txt:2: rank 1: bad action 'Q'"),
        ("huge.txt", "rank 0: F0.0 B0.0 F999999999.0\n",
         "huge.txt:1: rank 0: bad action 'F999999999.0': stage 999999999 is out of range "
         "(allowed: 0..4194303)"),
        # past the file's bound but within what an action can hold: the same range named
        ("packed.txt", "rank 0: F0.0 B0.0 F8388607.0\n",
         "packed.txt:1: rank 0: bad action 'F8388607.0': stage 8388607 is out of range "
         "(allowed: 0..4194303)"),
        ("large.txt", "rank 0: F0.0 B0.0 F5000000.0\n",
         "large.txt:1: rank 0: bad action 'F5000000.0': stage 5000000 is out of range "
         "(allowed: 0..4194303)"),
        # a micro-batch number far past the others: the skipped ones are named, not sized
        ("many_mb.txt", "rank 0: F0.0 B0.0 F0.1048575\n",
         "many_mb.txt:1: rank 0, action F0.1048575: micro-batch 1 is never run (micro-batches "
         "0..1048575 must each appear)"),
        ("short_mb.txt", "rank 0: F0.0 F0.1\n",
         "short_mb.txt:1: rank 0, action F0.1: micro-batch 1 on 1 stages needs 2 (stage, "
         "micro-batch) pairs"),
        ("two_ranks.csv", "0F0,0B0,0F1\n0B1\n",
         "two_ranks.csv:2: rank 1, action B0.1: stage 0 already runs on rank 0 (line 1)"),
        ("cell.csv", "0F0,0B0\n1F0,1Z0\n", "cell.csv:2: rank 1: bad action '1Z0'"),
        ("placement.txt", "# placement: diagonal\nrank 0: F0.0 B0.0\n",
         "placement.txt:1: unknown placement 'diagonal'"),
        ("empty.txt", "# nothing\n", "empty.txt: no actions"),
        # a skipped stage is named, not the task count it also falls short of
        ("gap.csv", "0F0,0B0\n2F0,2B0\n",
         "gap.csv:2: rank 1, action F2.0: stage 1 is never run, so its rank is unknown"),
        ("trailing_comma.txt",
         "# placement: stage-ranks 0,1,\nrank 0: F0.0 B0.0\nrank 1: F1.0 B1.0\n",
         "trailing_comma.txt:1: placement stage-ranks '0,1,': no rank for stage 2 after the last "
         "comma (allowed: one rank 0..4095 per stage"),
    ]

    def test_blank_rows_past_the_rank_bound_are_refused_before_they_are_made(self):
        # 50 million blank lines between two rows would be as many idle ranks (about 1.8 GB made
        # before the bound was checked); under a 1 GiB address space only a check first refuses
        # them in one line, not in bad_alloc.
        path = os.path.join(self.dir.name, "blank.csv")
        with open(path, "w") as f:
            f.write("0F0,0B0\n" + "\n" * 50_000_000 + "1F0,1B0\n")
        r = subprocess.run([PPBENCH, "show", "--schedule-file", path], capture_output=True,
                           text=True, timeout=120, preexec_fn=address_space(1 << 30))
        one_line_refusal(self, r, "blank.csv:50000002: more than 4096 rows")

    def check_one_line(self, args, expected):
        return one_line_refusal(self, run(*args), expected)

    def test_each_broken_file_is_one_line_exit_2(self):
        for name, text, expected in self.CASES:
            path = self.write(name, text)
            for cmd in (["show"], ["simulate"], MLP):
                with self.subTest(name=name, cmd=cmd[0]):
                    line = self.check_one_line([*cmd, "--schedule-file", path],
                                               os.path.join(self.dir.name, expected))
                    if name == "deadlock.txt":
                        self.assertIn("deadlock: ", line)

    def test_bad_paths_and_flags(self):
        good = self.write("good.txt", "rank 0: F0.0 B0.0\nrank 1: F1.0 B1.0\n")
        self.check_one_line(["show", "--schedule-file", os.path.join(self.dir.name, "nope")],
                            "no such file")
        self.check_one_line(["show", "--schedule-file", self.dir.name], "not a regular file")
        self.check_one_line(["show", "--schedule-file", good, "-d", "3"],
                            "--devices 3 disagrees with --schedule-file")
        self.check_one_line(["simulate", "--schedule-file", good, "-n", "2"],
                            "--microbatches 2 disagrees with --schedule-file")
        self.check_one_line(["show", "--schedule-file", good, "-s", "1f1b"],
                            "--schedule and --schedule-file exclude each other")
        self.check_one_line(["show", "--schedule-file", good, "--chunks", "2"],
                            "--chunks and --group-size are for --schedule")
        self.check_one_line(["show"], "--schedule is required")
        self.check_one_line(["show", "-s", "1f1b", "-n", "4"], "--devices is required")
        if os.geteuid() != 0:  # root reads any file
            os.chmod(good, 0)
            self.check_one_line(["show", "--schedule-file", good], "cannot open it")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
