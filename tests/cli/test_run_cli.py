#!/usr/bin/env python3
"""`ppbench run` as a new user would try it: bad workloads, shapes and options
exit 2 with one line naming the value, nothing on stdout, no file written; a
good run prints a record whose loss does not depend on the schedule."""
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor
from cli_checks import address_space, one_line, one_line_refusal  # this folder is on sys.path

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"
MLP = ["run", "--workload", "mlp", "--layers", "4", "--width", "16"]


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=120)


class BadRunInput(unittest.TestCase):
    CASES = [
        (["run", "--workload", "mlp", "--layers", "2", "-s", "1f1b", "-d", "4", "-n", "8"],
         "2 layers"),
        (["run", "--workload", "transformer", "--preset", "tiny-llama", "--heads", "5",
          "-s", "1f1b", "-d", "2", "-n", "4"], "--heads 5"),
        (["run", "--workload", "amoebanet", "--layers", "4", "-s", "1f1b", "-d", "2", "-n", "4"],
         "--layers 4"),
        # Found by a random --check explorer: the last cells' 1x1 images left BatchNorm one value
        # per channel, and the run failed with exit 1 inside a rank.
        (["run", "--workload", "amoebanet", "--layers", "3", "--filters", "8", "--image-size", "32",
          "-s", "1f1b", "-d", "2", "-n", "2"], "--image-size 32 with --microbatch-size 1"),
        (["run", "--workload", "mlp", "--width", "0", "-s", "1f1b", "-d", "2", "-n", "4"],
         "--width 0"),
        (["run", "--workload", "nosuch", "-s", "1f1b", "-d", "2", "-n", "4"], "nosuch"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--dtype", "f16"], "f16"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--dtype", "bf16"], "bf16"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "1"], "N=1"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--partition", "1,2,3"], "1,2,3"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--partition", "1,2"], "1,2"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--steps", "0"], "--steps"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--preset", "tiny-llama"], "--preset"),
        (["run", "--workload", "transformer", "--preset", "tiny-gpipe", "--kv-heads", "2",
          "-s", "1f1b", "-d", "2", "-n", "4"], "--kv-heads 2"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--microbatch-size", "0"], "--microbatch-size"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--cuda-graph"], "--backend cuda"),
        # Numbers: seeds are 0..2^64-1 in decimal, the watchdog 0.001..1e6 seconds.
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--seed", "-1"], "--seed"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--seed", "18446744073709551616"], "--seed"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--watchdog", "nan"], "--watchdog"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--watchdog", "1e300"], "--watchdog"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--watchdog", "0"], "--watchdog"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--watchdog", "0.01"], "0.05"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--steps", "1e3"], "--steps"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--input-dim", "0"], "--input-dim 0"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--width", "99999999999999999999"], "--width"),
        # Sizes the machine cannot hold, refused before anything is allocated.
        (["run", "--workload", "mlp", "--layers", "2", "--width", "4294967297",
          "-s", "1f1b", "-d", "2", "-n", "4"], "overflow"),
        (["run", "--workload", "mlp", "--layers", "2", "--width", "100000", "-s", "1f1b", "-d", "2",
          "-n", "4"], "--width 100000"),
        (["run", "--workload", "transformer", "--preset", "llama3-8b",
          "-s", "1f1b", "-d", "2", "-n", "4"], "needs about"),
        (["run", "--workload", "mlp", "--layers", "10000000", "--width", "8",
          "-s", "1f1b", "-d", "2", "-n", "4"], "--layers 10000000"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--max-memory", "1K"], "--max-memory 1K"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--optimizer", "adam"], "--optimizer"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--lr", "0"], "--lr"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--weight-decay", "nan"], "--weight-decay"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--sms-per-device", "16"], "--backend cuda"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--pin-ranks", "yes"], "--pin-ranks"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--backend", "cuda", "--virtual-devices", "2",
                "--pin-ranks", "off"], "--pin-ranks"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--backend", "cuda", "--virtual-devices", "2",
                "--sms-per-device", "0"], "--sms-per-device"),
        # Found by scripts/fuzz_cli.py: the emulated link's numbers got CLI11's bare "Could not
        # convert", and a bad one was refused only after a GPU was found.
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--backend", "cuda", "--virtual-devices", "2",
                "--link-bandwidth", "abc"], "--link-bandwidth: 'abc' is not a number"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--backend", "cuda", "--virtual-devices", "2",
                "--link-latency", "-1"], "--link-latency: '-1' is out of range"),
        (MLP + ["-s", "1f1b", "-d", "2", "-n", "4", "--layers", "x"],
         "'x' is not an integer (allowed: a decimal integer)"),
    ]

    def test_exit_2_with_one_line(self):
        for args, needle in self.CASES:
            with self.subTest(args=args):
                one_line_refusal(self, run(*args), needle)

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

    def test_gpu_placement_flags_are_checked_before_any_gpu_is_looked_for(self):
        # Wrong on every machine, so exit 2 on every machine: a node without a GPU (exit 3 for
        # the run itself) says what is wrong with the flags first.
        cuda = MLP + ["--backend", "cuda", "-s", "1f1b", "-n", "4"]
        cases = [
            (["-d", "2", "--gpus", "0,0"], "GPU 0 is listed twice"),
            (["-d", "3", "--gpus", "0,1"], "lists 2 GPUs but --devices is 3"),
            (["-d", "2", "--gpus", "0,1", "--virtual-devices", "2"], "exclude each other"),
            (["-d", "2", "--virtual-devices", "4"], "--virtual-devices 4 differs from --devices 2"),
            (["-d", "2"], "--devices 2"),
        ]
        for extra, needle in cases:
            with self.subTest(extra=extra):
                r = run(*cuda, *extra)
                if "built without CUDA" in r.stderr:
                    self.skipTest("this ppbench was built without CUDA")
                one_line_refusal(self, r, needle)

    def test_sms_per_device_sizes_virtual_devices_only(self):
        # Decided before any GPU is opened.
        cuda = MLP + ["--backend", "cuda", "-s", "1f1b", "-d", "2", "-n", "4", "--sms-per-device",
                      "16"]
        r = run(*cuda)
        if "built without CUDA" in r.stderr:
            self.skipTest("this ppbench was built without CUDA")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("--sms-per-device 16 sizes the partitions of --virtual-devices", r.stderr)
        r = run(*cuda, "--virtual-devices", "2", "--format", "json")
        if r.returncode != 0:  # no GPU here: refused for that, not the flag
            self.assertNotIn("--sms-per-device", r.stderr)
        else:
            self.assertEqual(json.loads(r.stdout)["gpu"]["sms_per_rank"], [16, 16])

    def test_cuda_runs_the_optimizer_but_not_twin_copies_in_a_graph(self):
        # Decided before any GPU is opened. Chimera keeps two copies of each part, whose update
        # would wait across two ranks' graphs; 1F1B's updates are captured with its step.
        cuda = MLP + ["--backend", "cuda", "-d", "4", "-n", "8", "--gpus", "0,1,2,3"]
        r = run(*cuda, "-s", "chimera", "--cuda-graph")  # the default optimizer, adamw
        if "built without CUDA" in r.stderr:
            self.skipTest("this ppbench was built without CUDA")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("--cuda-graph with --optimizer adamw", r.stderr)
        for extra in (["-s", "chimera", "--cuda-graph", "--optimizer", "none"],
                      ["-s", "chimera", "--optimizer", "sgd"],
                      ["-s", "1f1b", "--cuda-graph", "--optimizer", "sgd"]):
            r = run(*cuda, *extra, "--format", "json")
            if r.returncode != 0:  # no GPU, too few GPUs or no NCCL here: refused for that
                self.assertNotIn("--optimizer", r.stderr, extra)
                self.assertNotIn("forward and backward only", r.stderr, extra)

    def test_cuda_backend_takes_amoebanet(self):
        # AmoebaNet has GPU layers: without a GPU the run is refused for that, not for the workload.
        r = run("run", "--backend", "cuda", "--workload", "amoebanet", "--layers", "3",
                "--filters", "16", "--image-size", "64", "-s", "1f1b", "-d", "2", "-n", "4",
                "--virtual-devices", "2")
        self.assertNotIn("GPU kernel", r.stderr)
        if "no CUDA device visible" in r.stderr or "built without CUDA" in r.stderr:
            self.assertEqual(r.returncode, 3, r.stderr)  # the machine, not the input
            self.assertEqual(r.stdout, "")
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        else:
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_bad_flash_path_is_refused_with_one_line(self):
        # PPBENCH_FLASH picks the fused attention's kernels of a CUDA run: a value it does not know
        # is the user's to fix (exit 2, naming it), found before any GPU is looked for. A build
        # without CUDA refuses the backend first (exit 3), which says nothing of the variable.
        env = dict(os.environ, PPBENCH_FLASH="fastest")
        r = subprocess.run([PPBENCH, *MLP, "--backend", "cuda", "-s", "1f1b", "-d", "2", "-n", "4",
                            "--virtual-devices", "2"], capture_output=True, text=True, timeout=120,
                           env=env)
        if "built without CUDA" in r.stderr:
            self.assertEqual(r.returncode, 3, r.stderr)
            return
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("PPBENCH_FLASH", r.stderr)
        self.assertIn("'fastest'", r.stderr)
        self.assertIn("general", r.stderr)

    def test_unwritable_results_are_refused_up_front(self):
        r = run(*MLP, "-s", "1f1b", "-d", "2", "-n", "4", "--results", "/nonexistent-dir/x.jsonl")
        self.assertEqual(r.returncode, 2)
        self.assertIn("nonexistent-dir", r.stderr)

    @unittest.skipUnless(os.path.exists("/proc/version"), "no procfs")
    def test_a_kernel_file_is_refused_up_front(self):
        # Root may open /proc/version for writing; the write would fail only after the run.
        r = run(*MLP, "-s", "1f1b", "-d", "2", "-n", "4", "--results", "/proc/version")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("kernel file", r.stderr)
        self.assertEqual(r.stdout, "")


TINY = ["run", "--workload", "mlp", "--layers", "2", "--width", "8",
        "-s", "1f1b", "-d", "2", "-n", "2"]


class Sizes(unittest.TestCase):
    def test_ids_a_dtype_cannot_hold_exactly_are_refused_before_allocating(self):
        # The CPU kernels keep token ids and class targets as values of the run's dtype; f32 is
        # exact only up to 2^24, and past it these runs trained on rounded targets (--check
        # FAILED, exit 0 without it). Under a 1 GiB address space: the refusal comes before the
        # 30M-row embedding, head and data are allocated, not as bad_alloc (exit 3), and before
        # the memory estimate, which would refuse them under that limit for want of room.
        tiny = ["--hidden", "2", "--heads", "1", "--kv-heads", "1", "--ffn", "2", "--layers", "2",
                "--seq", "8"]
        cases = [
            (["run", "-w", "transformer", "--preset", "tiny-llama", *tiny, "--vocab", "30000001",
              "-s", "1f1b", "-d", "2", "-n", "2", "--check", "--optimizer", "none"],
             "--vocab 30000001"),
            (["run", "-w", "mlp", "--width", "2", "--layers", "2", "--classes", "30000001",
              "-b", "4", "-s", "1f1b", "-d", "2", "-n", "4", "--check", "--optimizer", "none"],
             "--classes 30000001"),
            # Just past the limit, without --check.
            (["run", "-w", "mlp", "--width", "2", "--layers", "2", "--classes", "16777218",
              "-s", "1f1b", "-d", "2", "-n", "2"], "--classes 16777218"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                r = subprocess.run([PPBENCH, *args], capture_output=True,
                                   text=True, timeout=120, preexec_fn=address_space(1 << 30))
                line = one_line_refusal(self, r, needle)
                for word in ["--dtype f32", "16777216", "at most 16777217", "use --dtype f64"]:
                    self.assertIn(word, line)

    def test_ids_at_the_f32_limit_run(self):
        # 2^24 + 1 classes: the largest target, 2^24, is still exact in f32 (that its gradient
        # lands on its own column is tested in tests/backends/test_exact_indices.cpp), so the run
        # is not refused. Without --check: the float64 reference would triple its 0.7 GB.
        r = run("run", "-w", "mlp", "--width", "2", "--layers", "2", "--classes", "16777217",
                "-s", "1f1b", "-d", "2", "-n", "2", "--steps", "1", "--optimizer", "none",
                "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("loss", json.loads(r.stdout))

    def test_refused_before_allocating_with_the_numbers(self):
        # Under a 2 GiB address space: had the run allocated its 1e10 parameters first, it would
        # end in bad_alloc (exit 3), not in the refusal.
        line = one_line(self, subprocess.run(
            [PPBENCH, "run", "--workload", "mlp", "--layers", "2", "--width", "100000",
             "-s", "1f1b", "-d", "2", "-n", "4"], capture_output=True, text=True, timeout=300,
            preexec_fn=address_space(2 << 30)), 2)
        for needle in ["--width 100000", "--schedule 1f1b", "needs about", "GiB", "available",
                       "--max-memory"]:
            self.assertIn(needle, line)

    def test_an_address_space_limit_counts_the_rank_threads_mappings(self):
        # 120 MiB of tensors under a 390 MiB `ulimit -v`: the resident estimate fits, but each
        # rank thread maps its stack, a malloc arena and OpenBLAS's GEMM buffer, and OpenBLAS
        # retries a buffer it cannot map for ever: the step hung instead of failing.
        r = subprocess.run(
            [PPBENCH, "run", "-w", "mlp", "--layers", "8", "--width", "1024", "-b", "64",
             "-s", "1f1b", "-d", "2", "-n", "16"], capture_output=True, text=True, timeout=60,
            preexec_fn=address_space(400000 << 10))
        line = one_line_refusal(self, r, "2 threads' stacks, malloc arenas and GEMM buffers")
        self.assertIn("left of the address-space limit (ulimit -v)", line)

    def test_every_copy_and_the_optimizer_states_are_counted(self):
        # mlp 8 x 4096: 1.18e8 parameters, 16 bytes each in f32 with AdamW (values, gradients,
        # m, v); Chimera-doubling's two chains hold every part twice.
        wide = ["run", "--workload", "mlp", "--layers", "8", "--width", "4096",
                "--max-memory", "100M"]
        line = one_line(self, run(*wide, "-s", "1f1b", "-d", "2", "-n", "2"), 2)
        self.assertIn("parameters x 16 bytes (values, gradients, optimizer states) = 1.75 GiB",
                      line)
        line = one_line(self, run(*wide, "-s", "chimera-doubling", "-d", "2", "-n", "4"), 2)
        self.assertIn("x 16 bytes (values, gradients, optimizer states) x 2 copies = 3.5 GiB",
                      line)
        line = one_line(self, run(*wide, "-s", "1f1b", "-d", "2", "-n", "2", "--optimizer",
                                  "none"), 2)
        self.assertIn("parameters x 8 bytes", line)

    def test_watchdog_message_prints_bounds_readably(self):
        line = one_line(self, run(*TINY, "--watchdog", "-1"), 2)
        self.assertLess(max(len(n) for n in re.findall(r"\d+", line)), 21, line)


class StepFailure(unittest.TestCase):
    def test_a_slow_rank_is_not_a_stalled_step(self):
        # A watchdog shorter than one forward pass (rank 0's F of 1024 x 2048 x 2048, two layers,
        # 17 GFLOP, takes a few hundred milliseconds): rank 1 waits that long for rank 0's
        # activations, but rank 0 is working all the while, so nothing stands still and the step
        # runs. (It used to fail, exit 1, "watchdog: rank 1 waited 0.02 s at recv(F0.0<-0)".)
        # 0.05 s is the shortest --watchdog allowed. Between rank threads
        # the watchdog fires only where no rank made progress for the whole time, which a
        # validated schedule never leaves them in: the executor's tests build such a step, and
        # test_mpi_cli.py stops one across processes, where each wait is limited on its own.
        r = run("run", "--workload", "mlp", "--layers", "4", "--width", "2048",
                "--microbatch-size", "1024", "-s", "1f1b", "-d", "2", "-n", "2", "--steps", "1",
                "--warmup", "0", "--optimizer", "none", "--watchdog", "0.05")
        self.assertEqual(r.returncode, 0, r.stderr)


class Results(unittest.TestCase):
    """--results appends one line under a lock, never rewrites the file, and is checked before
    the run; --trace-out streams to devices, FIFOs and -."""

    def test_two_outputs_or_an_output_and_an_input_in_one_file_are_refused(self):
        # The second written would replace the first (a log of records replaced by a device
        # profile), or the trace would overwrite the schedule file the run reads; however the
        # path is spelt, nothing is run or written.
        small = ["--workload", "mlp", "--layers", "2", "--width", "8"]
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "log.jsonl")
            self.assertEqual(run("run", *small, "-s", "1f1b", "-d", "2", "-n", "2",
                                 "--results", log).returncode, 0)
            with open(log) as f:
                before = f.read()
            sched = os.path.join(d, "s.txt")
            with open(sched, "w") as f:
                f.write("rank 0: F0.0 F0.1 B0.1 B0.0\nrank 1: F1.0 F1.1 B1.1 B1.0\n")
            os.symlink(sched, os.path.join(d, "link.txt"))
            cases = [
                (["-s", "1f1b", "-d", "2", "-n", "2", "--results", log, "--profile-out",
                  os.path.join(d, ".", "log.jsonl")], "is the same file as --results"),
                (["-s", "1f1b", "-d", "2", "-n", "2", "--results", os.path.join(d, "new"),
                  "--trace-out", os.path.join(d, "x", "..", "new")],
                 "is the same file as --results"),
                (["--schedule-file", sched, "--trace-out", os.path.join(d, "link.txt")],
                 "which this run reads"),
            ]
            for args, needle in cases:
                with self.subTest(args=args):
                    os.makedirs(os.path.join(d, "x"), exist_ok=True)
                    one_line_refusal(self, run("run", *small, *args), needle)
            with open(log) as f:
                self.assertEqual(f.read(), before)
            with open(sched) as f:
                self.assertTrue(f.read().startswith("rank 0:"))
            self.assertFalse(os.path.exists(os.path.join(d, "new")))
            # Relative spellings of one file not yet written, from the folder itself.
            r = subprocess.run([os.path.abspath(PPBENCH), "run", *small, "-s", "1f1b", "-d", "2",
                                "-n", "2", "--results", "q", "--trace-out", "x/../q"],
                               capture_output=True, text=True, timeout=120, cwd=d)
            one_line_refusal(self, r, "is the same file as --results")
            self.assertFalse(os.path.exists(os.path.join(d, "q")))
            # Distinct files, and two streams, are fine.
            r = run("run", *small, "-s", "1f1b", "-d", "2", "-n", "2", "--results", log,
                    "--trace-out", os.devnull, "--profile-out", os.devnull)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_concurrent_runs_lose_no_record(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "runs.jsonl")

            def writer(_):
                failures = 0
                for _ in range(50):
                    r = run(*TINY, "--results", path)
                    failures += r.returncode != 0
                return failures

            with ThreadPoolExecutor(8) as pool:
                self.assertEqual(sum(pool.map(writer, range(8))), 0)
            with open(path) as f:
                lines = f.read().splitlines()
            self.assertEqual(len(lines), 400)
            for line in lines:
                self.assertEqual(json.loads(line)["command"], "run")
            self.assertEqual(os.listdir(d), ["runs.jsonl"])

    def test_append_does_not_rewrite_and_starts_a_new_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "runs.jsonl")
            with open(path, "w") as f:
                f.write('{"complete": 1}\n{"killed": ')  # an old writer killed mid-line
            before = os.stat(path)
            r = run(*TINY, "--results", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            after = os.stat(path)
            self.assertEqual(before.st_ino, after.st_ino, "the file was replaced, not appended to")
            with open(path) as f:
                lines = f.read().splitlines()
            self.assertEqual(lines[:2], ['{"complete": 1}', '{"killed": '])
            self.assertEqual(json.loads(lines[2])["command"], "run")
            self.assertEqual(len(lines), 3)

    def test_bad_outputs_are_refused_before_the_run(self):
        # --steps 1000000 would run for hours (past run()'s timeout): only a check before the
        # run gives the refusal.
        long_run = TINY[:-2] + ["-n", "2", "--steps", "1000000"]
        with tempfile.TemporaryDirectory() as d:
            for flag in ["--results", "--trace-out"]:
                with self.subTest(flag=flag):
                    line = one_line(self, run(*long_run, flag, d), 2)
                    self.assertIn("is a directory", line)
            self.assertEqual(os.listdir(d), [])

    def test_a_failed_run_creates_and_changes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            new = os.path.join(d, "new.jsonl")
            old = os.path.join(d, "old.jsonl")
            with open(old, "w") as f:
                f.write('{"kept": 1}\n')
            for path in [new, old]:
                r = run("run", "--workload", "mlp", "--layers", "2", "--width", "8", "-s", "1f1b",
                        "-d", "4", "-n", "2", "--results", path, "--trace-out", path + ".trace")
                self.assertEqual(r.returncode, 2, r.stderr)
            self.assertFalse(os.path.exists(new))
            with open(old) as f:
                self.assertEqual(f.read(), '{"kept": 1}\n')
            self.assertEqual(sorted(os.listdir(d)), ["old.jsonl"])

    def test_a_failed_trace_write_keeps_the_record(self):
        with tempfile.TemporaryDirectory() as d:
            full = os.path.join(d, "full")
            try:
                os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
            except (PermissionError, OSError):
                if os.geteuid() == 0:
                    self.skipTest("mknod not allowed")
                full = "/dev/full"
            path = os.path.join(d, "runs.jsonl")
            r = run(*TINY, "--results", path, "--trace-out", full)
            self.assertIn("No space left", one_line(self, r, 3))
            self.assertTrue(stat.S_ISCHR(os.stat(full).st_mode))
            with open(path) as f:
                self.assertEqual(json.loads(f.read())["command"], "run")

    def test_dash_streams_the_trace_or_the_record_to_stdout(self):
        r = run(*TINY, "--trace-out", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        trace = json.loads(r.stdout)
        self.assertIn("traceEvents", trace)
        # The trace names what it shows (a viewer's or plot_timeline.py's title), and where.
        facts = trace["otherData"]
        self.assertEqual((facts["schedule"], facts["devices"], facts["microbatches"],
                          facts["chunks"], facts["time_unit"]), ("1f1b", 2, 2, 1, "s"))
        self.assertIn("git_commit", facts)
        self.assertNotIn("replicas", facts)  # one process
        r = run(*TINY, "--results", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["command"], "run")
        one_line(self, run(*TINY, "--results", "-", "--trace-out", "-"), 2)


class ChaoticCheck(unittest.TestCase):
    def test_a_reference_that_one_rounding_moves_past_the_ceiling_is_not_judged(self):
        # f32 AmoebaNet, BatchNorm over two values per channel, two AdamW steps: one rounding of
        # the reference's start moves it by about 1e3. It FAILED (exit 1) at error 0.68 under
        # a tolerance capped at 0.5; the last step can neither fail nor pass, so the first
        # step's gradients decide, and the run says so.
        args = ["run", "-s", "gpipe", "-d", "1", "-n", "4", "-w", "amoebanet", "--layers", "6",
                "--filters", "16", "--image-size", "32", "--classes", "3", "-b", "2",
                "--lr", "1e-4", "--dtype", "f32", "--check"]
        r = run(*args, "--steps", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("check: passed on the first step, largest relative gradient error", r.stdout)
        self.assertIn("the first step's gradients are compared instead", r.stdout)
        self.assertRegex(r.stdout, r"first step: passed, largest relative gradient error \S+ "
                                   r"\(layer .*\), tolerance 0.0001")
        r = run(*args, "--steps", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("check: passed", r.stdout)

    def test_a_reference_that_overflows_is_not_judged(self):
        # lr 1000: by the fourth step the single-device step's own gradients are NaN, and the
        # check FAILED (exit 1) a run that computes that very step; its first step decides.
        base = ["run", "-w", "mlp", "--layers", "3", "--width", "8", "-s", "naive", "-d", "1",
                "-n", "2", "--lr", "1000", "--optimizer", "sgd", "--check"]
        r = run(*base, "--steps", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("the last step is not judged: the single-device step itself overflows",
                      r.stdout)
        self.assertIn("first step: passed", r.stdout)


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
            self.assertAlmostEqual(rec["grad_norm"], ref["grad_norm"],
                                   delta=1e-10 * ref["grad_norm"])

    def test_the_text_tables_activations_are_in_the_records_binary_unit(self):
        # One unit for both activation columns, the one the largest value takes (as `memory`
        # and `model` print theirs), and the figures are the record's in it.
        args = [*MLP, "--dtype", "f64", "-s", "1f1b", "-d", "2", "-n", "4"]
        rec = self.record("-s", "1f1b", "-d", "2")
        text = run(*args)
        self.assertEqual(text.returncode, 0, text.stderr)
        header = re.search(r"peak act (\S+)\s+model act (\S+)", text.stdout)
        self.assertIsNotNone(header, text.stdout)
        self.assertEqual(header.group(1), header.group(2))
        scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[header.group(1)]
        largest = max(max(a["measured_peak_bytes"], a["model_peak_bytes"])
                      for a in rec["activation_bytes"])
        self.assertTrue(1 <= largest / scale < 1024, (largest, header.group(1)))
        for a in rec["activation_bytes"]:
            row = re.search(rf"^\s*{a['rank']}\s+\S+\s+\S+\s+(\S+)\s+(\S+)$", text.stdout,
                            re.MULTILINE)
            self.assertIsNotNone(row, text.stdout)
            self.assertAlmostEqual(float(row.group(1)), a["measured_peak_bytes"] / scale,
                                   delta=1e-3 * a["measured_peak_bytes"] / scale)
            self.assertAlmostEqual(float(row.group(2)), a["model_peak_bytes"] / scale,
                                   delta=1e-3 * a["model_peak_bytes"] / scale)

    def test_a_breadth_first_order_gets_the_mailboxes_it_needs(self):
        # looped-bfs at D = 2 sends a whole chunk's activations before its peer takes the first:
        # more than the default 4 messages per mailbox, which the default grows to.
        args = [*MLP, "--dtype", "f64", "-s", "looped-bfs", "-d", "2", "-n", "12", "--check",
                "--format", "json"]
        r = run(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = json.loads(r.stdout)
        self.assertGreater(rec["channel_capacity"], 4)
        self.assertTrue(rec["check"]["passed"], rec["check"])
        small = run(*args, "--channel-capacity", "4")
        self.assertEqual(small.returncode, 2, small.stderr)
        self.assertEqual(small.stdout, "")
        self.assertEqual(len(small.stderr.strip().splitlines()), 1, small.stderr)
        self.assertIn(f"with channel capacity 4; it runs with a channel capacity of "
                      f"{rec['channel_capacity']}", small.stderr)
        self.assertEqual(self.record("-s", "1f1b", "-d", "2")["channel_capacity"], 4)

    def test_amoebanet_f32_check_holds_to_the_f32_single_device_step(self):
        # With one image per micro-batch AmoebaNet's gradients below its last BatchNorms cancel
        # to rounding noise: f32 lands ~1e-3 from the float64 step whatever the schedule, D = 1
        # included, and --check against float64 failed every such run. Against the single-device
        # step in f32, the same kernels, the schedule's own differences are all that is left.
        amoeba = ["run", "-w", "amoebanet", "--filters", "8", "--layers", "3", "--image-size",
                  "64", "--check", "--format", "json"]
        for schedule in (["-s", "gpipe", "-d", "1", "-n", "1"],
                         ["-s", "1f1b", "-d", "2", "-n", "2"]):
            r = run(*amoeba, *schedule)
            self.assertEqual(r.returncode, 0, r.stderr)
            check = json.loads(r.stdout)["check"]
            self.assertTrue(check["passed"], check)
            self.assertLessEqual(check["max_rel_error"], 1e-4)
            self.assertNotIn("reference_spread", check)
            self.assertTrue(check["reference"].startswith("the CPU f32 single-device step"))

    def test_the_default_optimizer_is_adamw_and_steps_learn(self):
        rec = self.record("-s", "1f1b", "-d", "2", "--steps", "3", "--check")
        self.assertEqual(rec["optimizer"]["name"], "adamw")
        self.assertTrue(rec["check"]["passed"], rec["check"])  # against 3 steps on one device
        busy = sum(r["busy"] for r in rec["measured"]["ranks"])
        self.assertGreater(busy, 0)
        # Each step's loss comes before its update: with an optimizer they differ step to step.
        r = run(*MLP, "--dtype", "f64", "-n", "4", "-s", "1f1b", "-d", "2", "--steps", "3",
                "--progress", "--lr", "0.05")
        losses = [line.rsplit("loss ", 1)[1] for line in r.stderr.splitlines() if "loss " in line]
        self.assertEqual(len(losses), 3, r.stderr)
        self.assertEqual(len(set(losses)), 3, losses)
        r = run(*MLP, "--dtype", "f64", "-n", "4", "-s", "1f1b", "-d", "2", "--steps", "3",
                "--progress", "--optimizer", "none")
        losses = [line.rsplit("loss ", 1)[1] for line in r.stderr.splitlines() if "loss " in line]
        self.assertEqual(len(set(losses)), 1, losses)

    def test_rank_threads_are_pinned_where_each_has_a_cpu(self):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest(f"needs 2 CPUs, this process may use {len(cpus)}")
        pinned = self.record("-s", "1f1b", "-d", "2")["measured"]["pinned_cpus"]
        self.assertEqual(pinned, cpus[:2])
        self.assertIsNone(self.record("-s", "1f1b", "-d", "2", "--pin-ranks", "off")
                          ["measured"]["pinned_cpus"])
        # On one CPU the two ranks share it, unpinned, as their replay assumes.
        r = subprocess.run([PPBENCH, *MLP, "-n", "4", "-s", "1f1b", "-d", "2", "--format", "json"],
                           capture_output=True, text=True, timeout=120,
                           preexec_fn=lambda: os.sched_setaffinity(0, {cpus[0]}))
        self.assertEqual(r.returncode, 0, r.stderr)
        crowded = json.loads(r.stdout)
        self.assertEqual(crowded["predicted"]["cores"], 1)
        self.assertIsNone(crowded["measured"]["pinned_cpus"])

    def test_receives_that_find_their_tensor_queued_are_told_apart(self):
        # GPipe with a last stage seven layers to the first's one: rank 0 sends each forward long
        # before rank 1, busy with the one before, posts its receive. Those receives are the
        # consumer's own work; the backwards' gradients, which rank 0 waits for, also carry the
        # latency.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            rec = self.record("-s", "gpipe", "-d", "2", "--partition", "1,3", "--trace-out", path)
            with open(path) as f:
                events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        hand_over = rec["predicted"]["hand_over"]
        self.assertGreater(hand_over["receive_s"], 0)
        self.assertGreaterEqual(hand_over["delay_s"], 0)
        self.assertGreater(hand_over["send_s"], 0)
        # The trace says which receives those were, and what each action's sends took.
        hand_overs = [e for e in events if e["cat"] == "comm"]
        self.assertTrue(any(e["args"].get("queued") for e in hand_overs), hand_overs)
        self.assertTrue(any(e["args"].get("sends") for e in events if e["cat"] != "comm"))

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
