#!/usr/bin/env python3
"""`ppbench run` as a new user would try it: bad workloads, shapes and options
exit 2 with one line naming the value, nothing on stdout, no file written; a
good run prints a record whose loss does not depend on the schedule."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"
MLP = ["run", "--workload", "mlp", "--layers", "4", "--width", "16"]


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=120)


class BadRunInput(unittest.TestCase):
    CASES = [
        (["run", "--workload", "mlp", "--layers", "2", "-s", "1f1b", "-d", "4", "-n", "8"], "2 layers"),
        (["run", "--workload", "transformer", "--preset", "tiny-llama", "--heads", "5", "-s", "1f1b",
          "-d", "2", "-n", "4"], "--heads 5"),
        (["run", "--workload", "amoebanet", "--layers", "4", "-s", "1f1b", "-d", "2", "-n", "4"], "--layers 4"),
        (["run", "--workload", "mlp", "--width", "0", "-s", "1f1b", "-d", "2", "-n", "4"], "--width 0"),
        (["run", "--workload", "nosuch", "-s", "1f1b", "-d", "2", "-n", "4"], "nosuch"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--dtype", "f16"], "f16"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--dtype", "bf16"], "bf16"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "1"], "N=1"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--partition", "1,2,3"], "1,2,3"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--partition", "1,2"], "1,2"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--steps", "0"], "--steps"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--preset", "tiny-llama"], "--preset"),
        (["run", "--workload", "transformer", "--preset", "tiny-gpipe", "--kv-heads", "2", "-s", "1f1b",
          "-d", "2", "-n", "4"], "--kv-heads 2"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--microbatch-size", "0"], "--microbatch-size"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--cuda-graph"], "--backend cuda"),
    ]

    def test_exit_2_with_one_line(self):
        for args, needle in self.CASES:
            with self.subTest(args=args):
                r = run(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stdout, "")
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn(needle, lines[0])

    def test_cuda_graph_takes_gpus_but_not_virtual_devices(self):
        # Both are decided before any GPU is opened, so they run on a machine without one.
        cuda = MLP + ["--backend", "cuda", "-s", "1f1b", "-d", "2", "-n", "4", "--cuda-graph"]
        r = run(*cuda, "--virtual-devices", "2")
        if "built without CUDA" in r.stderr:
            self.skipTest("this ppbench was built without CUDA")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("--cuda-graph needs --gpus", r.stderr)
        r = run(*cuda, "--gpus", "0,1", "--format", "json")
        if r.returncode != 0:  # no GPU, one GPU, or no NCCL here: refused for that, not the flag
            self.assertNotIn("--cuda-graph", r.stderr)
        else:
            self.assertTrue(json.loads(r.stdout)["gpu"]["cuda_graph"]["enabled"])

    def test_cuda_backend_takes_amoebanet(self):
        # AmoebaNet has GPU layers: without a GPU the run is refused for that, not for the workload.
        r = run("run", "--backend", "cuda", "--workload", "amoebanet", "--layers", "3", "--filters", "16",
                "--image-size", "64", "-s", "1f1b", "-d", "2", "-n", "4", "--virtual-devices", "2")
        self.assertNotIn("GPU kernel", r.stderr)
        if "no CUDA device visible" in r.stderr or "built without CUDA" in r.stderr:
            self.assertEqual(r.returncode, 3, r.stderr)  # the machine, not the input
            self.assertEqual(r.stdout, "")
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        else:
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_unwritable_results_are_refused_up_front(self):
        r = run(*MLP, "-s", "1f1b", "-d", "2", "-n", "4", "--results", "/nonexistent-dir/x.jsonl")
        self.assertEqual(r.returncode, 2)
        self.assertIn("nonexistent-dir", r.stderr)


class GoodRun(unittest.TestCase):
    def record(self, *extra):
        r = run(*MLP, "--dtype", "f64", "-n", "4", "--format", "json", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_loss_and_grad_norm_do_not_depend_on_the_schedule(self):
        ref = self.record("-s", "gpipe", "-d", "1")
        for schedule, d in [("1f1b", 2), ("zb-h2", 2), ("interleaved-1f1b", 2), ("dualpipev", 2)]:
            rec = self.record("-s", schedule, "-d", str(d))
            self.assertAlmostEqual(rec["loss"], ref["loss"], delta=1e-10 * abs(ref["loss"]))
            self.assertAlmostEqual(rec["grad_norm"], ref["grad_norm"], delta=1e-10 * ref["grad_norm"])

    def test_text_summary_names_the_backend(self):
        r = run(*MLP, "-s", "1f1b", "-d", "2", "-n", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("run 1f1b on cpu: mlp D=2 N=4"), r.stdout)
        self.assertIn("bubble_fraction", r.stdout)

    def test_results_file_gets_one_line_per_run(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "runs.jsonl")
            for _ in range(2):
                r = run(*MLP, "-s", "1f1b", "-d", "2", "-n", "4", "--results", path)
                self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                rows = [json.loads(line) for line in f]
            self.assertEqual(len(rows), 2)
            self.assertIn("git_commit", rows[0]["provenance"])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
